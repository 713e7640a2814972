// The sinusoidal-table explorer: width, base, positions, column and layout on sliders; the table
// as a heatmap, one column as a curve, and the dot product by offset. The numbers are the
// formula of posenc.sinusoidal_table (and posenc.diagnostics.dot_product_by_offset); the browser
// tests compare compute() with values exported by the build from posenc itself.
(function () {
  "use strict";

  // Frequencies 1 / base^(2i/d), one per sine/cosine pair (ceil(d/2) of them).
  function frequencies(dim, base) {
    const freqs = [];
    for (let i = 0; 2 * i < dim; i++) freqs.push(1 / Math.pow(base, (2 * i) / dim));
    return freqs;
  }

  // Row-major (length x dim) table, Float64Array.
  function table(dim, base, length, layout) {
    const freqs = frequencies(dim, base);
    const nSin = freqs.length;
    const out = new Float64Array(length * dim);
    for (let p = 0; p < length; p++) {
      for (let j = 0; j < dim; j++) {
        let value;
        if (layout === "interleaved") {
          const angle = p * freqs[j >> 1];
          value = j % 2 === 0 ? Math.sin(angle) : Math.cos(angle);
        } else {
          value = j < nSin ? Math.sin(p * freqs[j]) : Math.cos(p * freqs[j - nSin]);
        }
        out[p * dim + j] = value;
      }
    }
    return out;
  }

  // Mean of PE(p) . PE(p+k) over p, for k = 0 .. length-1. A full sine/cosine pair contributes
  // cos(k w) for every p; a lone sine column (odd width) is averaged explicitly.
  function dotByOffset(dim, base, length) {
    const freqs = frequencies(dim, base);
    const pairs = Math.floor(dim / 2);
    const dots = new Float64Array(length);
    for (let k = 0; k < length; k++) {
      let sum = 0;
      for (let i = 0; i < pairs; i++) sum += Math.cos(k * freqs[i]);
      if (dim % 2 === 1) {
        const w = freqs[freqs.length - 1];
        let lone = 0;
        for (let p = 0; p + k < length; p++) lone += Math.sin(p * w) * Math.sin((p + k) * w);
        sum += lone / (length - k);
      }
      dots[k] = sum;
    }
    return dots;
  }

  function compute(settings) {
    const { dim, base, length, layout } = settings;
    return { table: table(dim, base, length, layout), dot: dotByOffset(dim, base, length) };
  }

  // ---------------------------------------------------------------- drawing

  const kit = window.posencExplorerKit;

  // Diverging blue-white-red for values in [-1, 1].
  function colour(v) {
    const t = Math.max(-1, Math.min(1, v));
    const a = Math.abs(t);
    const white = [247, 247, 247];
    const end = t < 0 ? [33, 102, 172] : [178, 24, 43];
    return white.map((w, c) => Math.round(w + (end[c] - w) * a));
  }

  // Three ticks per axis: both ends and the middle.
  function ticks(ctx, box, xMax, yMin, yMax) {
    const at = [0, 0.5, 1];
    kit.ticks(ctx, box,
      at.map((f) => [f, String(Math.round(f * xMax))]),
      at.map((f) => [f, Number((yMax - f * (yMax - yMin)).toPrecision(3)).toString()]));
  }

  function curve(ctx, box, ys, yMin, yMax, colourName) {
    ctx.strokeStyle = colourName;
    ctx.lineWidth = 1.5;
    ctx.beginPath();
    const n = ys.length;
    for (let i = 0; i < n; i++) {
      const x = box.x + (n === 1 ? 0 : (i / (n - 1)) * box.w);
      const y = box.y + ((yMax - ys[i]) / (yMax - yMin)) * box.h;
      if (i === 0) ctx.moveTo(x, y);
      else ctx.lineTo(x, y);
    }
    ctx.stroke();
  }

  function mount(root, labels) {
    const controls = document.createElement("div");
    controls.className = "posenc-explorer-controls";
    root.append(controls);
    const width = kit.range(2, 256, 1, 64);
    // The base moves on a log scale: 10^1 .. 10^6.
    const logBase = kit.range(1, 6, 0.1, 4);
    const positions = kit.range(16, 1024, 1, 256);
    const column = kit.range(0, 255, 1, 8);
    const layout = kit.select([["interleaved", labels.interleaved], ["concat", labels.concat]]);
    kit.control(controls, labels.width, width, (v) => String(v));
    kit.control(controls, labels.base, logBase, (v) => Math.round(Math.pow(10, v)).toLocaleString());
    kit.control(controls, labels.positions, positions, (v) => String(v));
    kit.control(controls, labels.column, column, (v) => String(v));
    kit.control(controls, labels.layout, layout, null);
    const canvas = kit.canvas(root, 440, labels.table_title);
    const ctx = canvas.getContext("2d");

    const draw = kit.timed(root, () => {
      const dim = Number(width.value);
      column.max = String(dim - 1);
      const col = Math.min(Number(column.value), dim - 1);
      const settings = {
        dim,
        base: Math.pow(10, Number(logBase.value)),
        length: Number(positions.value),
        layout: layout.value,
      };
      const result = compute(settings);
      ctx.clearRect(0, 0, canvas.width, canvas.height);
      // The table on the left, two curves stacked on the right.
      const half = Math.floor((canvas.width - 150) / 2);
      const boxes = [
        { x: 55, y: 30, w: half, h: 360 },
        { x: half + 125, y: 30, w: half, h: 135 },
        { x: half + 125, y: 255, w: half, h: 135 },
      ];
      kit.image(ctx, boxes[0], settings.length, dim, (p, j) => colour(result.table[p * dim + j]));
      kit.frame(ctx, boxes[0], labels.table_title, labels.column_axis, labels.position_axis);
      ticks(ctx, boxes[0], dim - 1, settings.length - 1, 0);
      const values = [];
      for (let p = 0; p < settings.length; p++) values.push(result.table[p * dim + col]);
      curve(ctx, boxes[1], values, -1.05, 1.05, "#1f77b4");
      kit.frame(ctx, boxes[1], `${labels.curve_title} ${col}`, labels.position_axis, labels.value_axis);
      ticks(ctx, boxes[1], settings.length - 1, -1, 1);
      const dots = Array.from(result.dot);
      const top = Math.max(...dots);
      const bottom = Math.min(0, ...dots);
      curve(ctx, boxes[2], dots, bottom, top, "#d62728");
      kit.frame(ctx, boxes[2], labels.dot_title, labels.offset_axis, labels.dot_axis);
      ticks(ctx, boxes[2], settings.length - 1, bottom, top);
    });

    for (const input of [width, logBase, positions, column]) input.addEventListener("input", draw);
    layout.addEventListener("change", draw);
    draw();
  }

  kit.register("sinusoidal", { compute }, mount);
})();

// The ALiBi explorer: the slopes for any head count, the bias of one head as a query x key
// matrix (causal), and the last query's bias for every head. slopes() and bias() follow
// posenc.alibi_slopes and posenc.alibi_bias; the browser tests compare them with values exported
// by the build.
(function () {
  "use strict";

  // The paper's rule: a geometric sequence 2^(-8/n), ... for n a power of two; otherwise the
  // slopes of the largest power of two below n, then every other slope of twice that.
  function slopes(heads) {
    const closest = Math.pow(2, Math.floor(Math.log2(heads)));
    const out = [];
    for (let k = 1; k <= closest; k++) out.push(Math.pow(2, (-8 / closest) * k));
    for (let k = 1; k < 2 * (heads - closest); k += 2) out.push(Math.pow(2, (-4 / closest) * k));
    return out;
  }

  // (heads x qLen x kLen), row-major: -slope * |i' - j| with i' = kLen - qLen + i.
  function bias(heads, qLen, kLen) {
    const m = slopes(heads);
    const out = new Float64Array(heads * qLen * kLen);
    for (let h = 0; h < heads; h++) {
      for (let i = 0; i < qLen; i++) {
        const query = kLen - qLen + i;
        for (let j = 0; j < kLen; j++) out[(h * qLen + i) * kLen + j] = 0 - m[h] * Math.abs(query - j);
      }
    }
    return out;
  }

  function compute(settings) {
    return { slopes: slopes(settings.heads), bias: bias(settings.heads, settings.qLen, settings.kLen) };
  }

  // ---------------------------------------------------------------- drawing

  function frame(ctx, box, title, xLabel, yLabel) {
    ctx.fillStyle = "#222";
    ctx.textAlign = "center";
    ctx.font = "13px sans-serif";
    ctx.fillText(title, box.x + box.w / 2, box.y - 8);
    ctx.font = "12px sans-serif";
    ctx.fillText(xLabel, box.x + box.w / 2, box.y + box.h + 32);
    ctx.save();
    ctx.translate(box.x - 42, box.y + box.h / 2);
    ctx.rotate(-Math.PI / 2);
    ctx.fillText(yLabel, 0, 0);
    ctx.restore();
    ctx.strokeStyle = "#444";
    ctx.strokeRect(box.x, box.y, box.w, box.h);
  }

  function colour(t) {
    const stops = [[68, 1, 84], [59, 82, 139], [33, 145, 140], [94, 201, 98], [253, 231, 37]];
    const x = Math.max(0, Math.min(1, t)) * (stops.length - 1);
    const i = Math.min(Math.floor(x), stops.length - 2);
    const w = x - i;
    return stops[i].map((c, k) => Math.round(c + (stops[i + 1][k] - c) * w));
  }

  function control(root, label, input, format) {
    const row = document.createElement("label");
    row.className = "posenc-explorer-control";
    const name = document.createElement("span");
    name.textContent = label;
    const shown = document.createElement("output");
    const update = () => (shown.textContent = format(Number(input.value)));
    input.addEventListener("input", update);
    update();
    row.append(name, input, shown);
    root.append(row);
  }

  function range(min, max, step, value) {
    const input = document.createElement("input");
    Object.assign(input, { type: "range", min, max, step, value });
    return input;
  }

  function mount(root) {
    const labels = JSON.parse(root.dataset.labels);
    const chinese = document.documentElement.lang.startsWith("zh");
    const controls = document.createElement("div");
    controls.className = "posenc-explorer-controls";
    root.append(controls);
    const heads = range(1, 64, 1, 12);
    const head = range(0, 63, 1, 0);
    const length = range(8, 128, 1, 32);
    control(controls, labels.heads, heads, (v) => String(v));
    control(controls, labels.head, head, (v) => String(Math.min(v, Number(heads.value) - 1)));
    control(controls, labels.length, length, (v) => String(v));
    const summary = document.createElement("p");
    summary.className = "posenc-explorer-summary";
    root.append(summary);
    const canvas = document.createElement("canvas");
    canvas.width = Math.max(560, root.clientWidth - 26);
    canvas.height = 330;
    canvas.setAttribute("role", "img");
    canvas.setAttribute("aria-label", labels.matrix_title);
    root.append(canvas);
    const ctx = canvas.getContext("2d");

    function draw() {
      const start = performance.now();
      const n = Number(heads.value);
      head.max = String(n - 1);
      const shownHead = Math.min(Number(head.value), n - 1);
      const seq = Number(length.value);
      const { slopes: m, bias: b } = compute({ heads: n, qLen: seq, kLen: seq });
      const colon = chinese ? "：" : ": ";
      const separator = chinese ? "，" : ", ";
      summary.textContent = `${labels.slopes}${colon}${m.map((v) => Number(v.toPrecision(4))).join(separator)}`;
      root.dataset.slopes = JSON.stringify(m);

      ctx.clearRect(0, 0, canvas.width, canvas.height);
      const half = Math.floor((canvas.width - 160) / 2);
      const left = { x: 60, y: 30, w: Math.min(half, 240), h: 240 };
      const right = { x: half + 140, y: 30, w: half, h: 240 };
      // Left: one head's causal bias (future keys left white).
      const image = ctx.createImageData(seq, seq);
      const lowest = -m[shownHead] * (seq - 1);
      for (let i = 0; i < seq; i++) {
        for (let j = 0; j < seq; j++) {
          const value = b[(shownHead * seq + i) * seq + j];
          const [r, g, bl] = j > i ? [255, 255, 255] : colour(lowest === 0 ? 1 : 1 - value / lowest);
          image.data.set([r, g, bl, 255], 4 * (i * seq + j));
        }
      }
      const off = document.createElement("canvas");
      off.width = seq;
      off.height = seq;
      off.getContext("2d").putImageData(image, 0, 0);
      ctx.imageSmoothingEnabled = false;
      ctx.drawImage(off, left.x, left.y, left.w, left.h);
      frame(ctx, left, `${labels.matrix_title} (${shownHead})`, labels.key_axis, labels.query_axis);
      // Right: the last query's bias against distance, one line per head.
      const floor = -Math.max(...m) * (seq - 1);
      for (let h = 0; h < n; h++) {
        ctx.strokeStyle = h === shownHead ? "#d62728" : "rgba(31, 119, 180, 0.45)";
        ctx.lineWidth = h === shownHead ? 2 : 1;
        ctx.beginPath();
        for (let k = 0; k < seq; k++) {
          const value = b[(h * seq + seq - 1) * seq + (seq - 1 - k)];
          const x = right.x + (k / (seq - 1)) * right.w;
          const y = right.y + (value / floor) * right.h;
          if (k === 0) ctx.moveTo(x, y);
          else ctx.lineTo(x, y);
        }
        ctx.stroke();
      }
      frame(ctx, right, labels.lines_title, labels.distance_axis, labels.bias_axis);
      ctx.fillStyle = "#444";
      ctx.font = "11px sans-serif";
      ctx.textAlign = "right";
      ctx.fillText("0", right.x - 4, right.y + 4);
      ctx.fillText(Number(floor.toPrecision(3)).toString(), right.x - 4, right.y + right.h + 4);
      ctx.textAlign = "center";
      ctx.fillText("0", right.x, right.y + right.h + 14);
      ctx.fillText(String(seq - 1), right.x + right.w, right.y + right.h + 14);
      root.dataset.drawMs = (performance.now() - start).toFixed(2);
      root.dataset.draws = String(Number(root.dataset.draws || 0) + 1);
    }

    for (const input of [heads, head, length]) input.addEventListener("input", draw);
    draw();
    root.dataset.firstDrawMs = root.dataset.drawMs;
  }

  window.posencExplorers = Object.assign(window.posencExplorers || {}, { alibi: { compute } });
  document.addEventListener("DOMContentLoaded", () => {
    for (const root of document.querySelectorAll('.posenc-explorer[data-explorer="alibi"]')) mount(root);
  });
})();

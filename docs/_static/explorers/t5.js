// The T5 bucket explorer: bidirectional or causal, num_buckets and max_distance on controls; the
// distance -> bucket staircase and the query x key bucket matrix. bucket() follows
// posenc.t5_relative_position_bucket step by step, float32 rounding included (Math.fround), and
// the browser tests compare it with values exported by the build from posenc.
(function () {
  "use strict";
  const f = Math.fround;

  function bucket(r, bidirectional, numBuckets, maxDistance) {
    let offset = 0;
    let perDirection = numBuckets;
    let n;
    if (bidirectional) {
      perDirection = Math.floor(numBuckets / 2);
      if (r > 0) offset = perDirection;
      n = Math.abs(r);
    } else {
      n = Math.max(-r, 0);
    }
    const maxExact = Math.floor(perDirection / 2);
    if (n < maxExact) return offset + n;
    // float32 throughout, as torch computes it: log(n / m) / log(max_distance / m) * (p - m).
    const ratio = f(f(n) / f(maxExact));
    const scaled = f(f(f(Math.log(ratio)) / f(Math.log(maxDistance / maxExact))) * f(perDirection - maxExact));
    return offset + Math.min(maxExact + Math.trunc(scaled), perDirection - 1);
  }

  function compute(settings) {
    const { bidirectional, numBuckets, maxDistance, low, high } = settings;
    const buckets = [];
    for (let r = low; r <= high; r++) buckets.push(bucket(r, bidirectional, numBuckets, maxDistance));
    return { buckets };
  }

  // First distance of the last bucket in one direction (where the staircase goes flat).
  function lastBucketStart(bidirectional, numBuckets, maxDistance) {
    const perDirection = bidirectional ? Math.floor(numBuckets / 2) : numBuckets;
    for (let n = 0; n <= maxDistance; n++) {
      if (bucket(-n, bidirectional, numBuckets, maxDistance) === perDirection - 1) return n;
    }
    return maxDistance;
  }

  // ---------------------------------------------------------------- drawing

  function frame(ctx, box, title, xLabel, yLabel, xTicks, yTicks) {
    ctx.fillStyle = "#222";
    ctx.textAlign = "center";
    ctx.font = "13px sans-serif";
    ctx.fillText(title, box.x + box.w / 2, box.y - 8);
    ctx.font = "12px sans-serif";
    ctx.fillText(xLabel, box.x + box.w / 2, box.y + box.h + 32);
    ctx.save();
    ctx.translate(box.x - 40, box.y + box.h / 2);
    ctx.rotate(-Math.PI / 2);
    ctx.fillText(yLabel, 0, 0);
    ctx.restore();
    ctx.strokeStyle = "#444";
    ctx.strokeRect(box.x, box.y, box.w, box.h);
    ctx.font = "11px sans-serif";
    for (const [fx, text] of xTicks) ctx.fillText(text, box.x + fx * box.w, box.y + box.h + 14);
    ctx.textAlign = "right";
    for (const [fy, text] of yTicks) ctx.fillText(text, box.x - 4, box.y + fy * box.h + 4);
  }

  // viridis-like ramp for t in [0, 1].
  function colour(t) {
    const stops = [[68, 1, 84], [59, 82, 139], [33, 145, 140], [94, 201, 98], [253, 231, 37]];
    const x = Math.max(0, Math.min(1, t)) * (stops.length - 1);
    const i = Math.min(Math.floor(x), stops.length - 2);
    const w = x - i;
    return stops[i].map((c, k) => Math.round(c + (stops[i + 1][k] - c) * w));
  }

  // ---------------------------------------------------------------- controls

  function control(root, label, input, format) {
    const row = document.createElement("label");
    row.className = "posenc-explorer-control";
    const name = document.createElement("span");
    name.textContent = label;
    row.append(name, input);
    if (format) {
      const shown = document.createElement("output");
      const update = () => (shown.textContent = format(Number(input.value)));
      input.addEventListener("input", update);
      update();
      row.append(shown);
    }
    root.append(row);
    return input;
  }

  function range(min, max, step, value) {
    const input = document.createElement("input");
    Object.assign(input, { type: "range", min, max, step, value });
    return input;
  }

  function mount(root) {
    const labels = JSON.parse(root.dataset.labels);
    const controls = document.createElement("div");
    controls.className = "posenc-explorer-controls";
    root.append(controls);
    const mode = document.createElement("select");
    for (const [value, text] of [["bidirectional", labels.bidirectional], ["causal", labels.causal]]) {
      const option = document.createElement("option");
      option.value = value;
      option.textContent = text;
      mode.append(option);
    }
    control(controls, labels.mode, mode, null);
    const numBuckets = control(controls, labels.num_buckets, range(4, 128, 2, 32), (v) => String(v));
    const maxDistance = control(controls, labels.max_distance, range(8, 1024, 1, 128), (v) => String(v));
    const length = control(controls, labels.length, range(16, 256, 1, 160), (v) => String(v));
    const summary = document.createElement("p");
    summary.className = "posenc-explorer-summary";
    root.append(summary);

    const canvas = document.createElement("canvas");
    canvas.width = Math.max(560, root.clientWidth - 26);
    canvas.height = 340;
    canvas.setAttribute("role", "img");
    canvas.setAttribute("aria-label", labels.curve_title);
    root.append(canvas);
    const ctx = canvas.getContext("2d");

    function draw() {
      const start = performance.now();
      const bidirectional = mode.value === "bidirectional";
      const buckets = Number(numBuckets.value);
      const perDirection = bidirectional ? Math.floor(buckets / 2) : buckets;
      const maxExact = Math.floor(perDirection / 2);
      // max_distance must exceed the exact buckets (posenc refuses the rest).
      maxDistance.min = String(maxExact + 1);
      const distance = Math.max(Number(maxDistance.value), maxExact + 1);
      const seq = Number(length.value);
      const span = Math.max(2 * distance, 32);
      const curve = compute({ bidirectional, numBuckets: buckets, maxDistance: distance, low: -span, high: span }).buckets;
      const flat = lastBucketStart(bidirectional, buckets, distance);
      // Full-width punctuation on Chinese pages, as in the page text.
      const chinese = document.documentElement.lang.startsWith("zh");
      const [colon, between] = chinese ? ["：", "；"] : [": ", " · "];
      summary.textContent = `${labels.exact}${colon}${maxExact}${between}${labels.last_start}${colon}${flat}`;
      root.dataset.exact = String(maxExact);
      root.dataset.lastStart = String(flat);

      ctx.clearRect(0, 0, canvas.width, canvas.height);
      const half = Math.floor((canvas.width - 150) / 2);
      const left = { x: 55, y: 30, w: half, h: 250 };
      const right = { x: half + 125, y: 30, w: Math.min(half, 250), h: 250 };
      ctx.strokeStyle = "#1f77b4";
      ctx.lineWidth = 1.5;
      ctx.beginPath();
      curve.forEach((b, i) => {
        const x = left.x + (i / (curve.length - 1)) * left.w;
        const y = left.y + left.h - (b / (buckets - 1)) * left.h;
        if (i === 0) ctx.moveTo(x, y);
        else ctx.lineTo(x, y);
      });
      ctx.stroke();
      frame(ctx, left, labels.curve_title, labels.distance_axis, labels.bucket_axis,
        [[0, String(-span)], [0.5, "0"], [1, String(span)]],
        [[0, String(buckets - 1)], [1, "0"]]);

      const image = ctx.createImageData(seq, seq);
      for (let i = 0; i < seq; i++) {
        for (let j = 0; j < seq; j++) {
          const [r, g, b] = colour(bucket(j - i, bidirectional, buckets, distance) / (buckets - 1));
          image.data.set([r, g, b, 255], 4 * (i * seq + j));
        }
      }
      const off = document.createElement("canvas");
      off.width = seq;
      off.height = seq;
      off.getContext("2d").putImageData(image, 0, 0);
      ctx.imageSmoothingEnabled = false;
      ctx.drawImage(off, right.x, right.y, right.w, right.h);
      frame(ctx, right, labels.matrix_title, labels.key_axis, labels.query_axis,
        [[0, "0"], [1, String(seq - 1)]], [[0, "0"], [1, String(seq - 1)]]);
      root.dataset.drawMs = (performance.now() - start).toFixed(2);
      root.dataset.draws = String(Number(root.dataset.draws || 0) + 1);
    }

    for (const input of [numBuckets, maxDistance, length]) input.addEventListener("input", draw);
    mode.addEventListener("change", draw);
    draw();
    root.dataset.firstDrawMs = root.dataset.drawMs;
  }

  window.posencExplorers = Object.assign(window.posencExplorers || {}, { t5: { compute } });
  document.addEventListener("DOMContentLoaded", () => {
    for (const root of document.querySelectorAll('.posenc-explorer[data-explorer="t5"]')) mount(root);
  });
})();

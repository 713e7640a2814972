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

  const kit = window.posencExplorerKit;

  function mount(root, labels) {
    const controls = document.createElement("div");
    controls.className = "posenc-explorer-controls";
    root.append(controls);
    const mode = kit.select([["bidirectional", labels.bidirectional], ["causal", labels.causal]]);
    const numBuckets = kit.range(4, 128, 2, 32);
    const maxDistance = kit.range(8, 1024, 1, 128);
    const length = kit.range(16, 256, 1, 160);
    kit.control(controls, labels.mode, mode, null);
    kit.control(controls, labels.num_buckets, numBuckets, (v) => String(v));
    kit.control(controls, labels.max_distance, maxDistance, (v) => String(v));
    kit.control(controls, labels.length, length, (v) => String(v));
    const summary = document.createElement("p");
    summary.className = "posenc-explorer-summary";
    root.append(summary);
    const canvas = kit.canvas(root, 340, labels.curve_title);
    const ctx = canvas.getContext("2d");

    const draw = kit.timed(root, () => {
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
      const { colon, between } = kit.punctuation();
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
      kit.frame(ctx, left, labels.curve_title, labels.distance_axis, labels.bucket_axis);
      kit.ticks(ctx, left, [[0, String(-span)], [0.5, "0"], [1, String(span)]], [[0, String(buckets - 1)], [1, "0"]]);
      kit.image(ctx, right, seq, seq, (i, j) => kit.viridis(bucket(j - i, bidirectional, buckets, distance) / (buckets - 1)));
      kit.frame(ctx, right, labels.matrix_title, labels.key_axis, labels.query_axis);
      kit.ticks(ctx, right, [[0, "0"], [1, String(seq - 1)]], [[0, "0"], [1, String(seq - 1)]]);
    });

    for (const input of [numBuckets, maxDistance, length]) input.addEventListener("input", draw);
    mode.addEventListener("change", draw);
    draw();
  }

  kit.register("t5", { compute }, mount);
})();

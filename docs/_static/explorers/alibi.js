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

  const kit = window.posencExplorerKit;

  function mount(root, labels) {
    const controls = document.createElement("div");
    controls.className = "posenc-explorer-controls";
    root.append(controls);
    const heads = kit.range(1, 64, 1, 12);
    const head = kit.range(0, 63, 1, 0);
    const length = kit.range(8, 128, 1, 32);
    kit.control(controls, labels.heads, heads, (v) => String(v));
    kit.control(controls, labels.head, head, (v) => String(Math.min(v, Number(heads.value) - 1)));
    kit.control(controls, labels.length, length, (v) => String(v));
    const summary = document.createElement("p");
    summary.className = "posenc-explorer-summary";
    root.append(summary);
    const canvas = kit.canvas(root, 330, labels.matrix_title);
    const ctx = canvas.getContext("2d");

    const draw = kit.timed(root, () => {
      const n = Number(heads.value);
      head.max = String(n - 1);
      const shownHead = Math.min(Number(head.value), n - 1);
      const seq = Number(length.value);
      const { slopes: m, bias: b } = compute({ heads: n, qLen: seq, kLen: seq });
      const { colon, comma } = kit.punctuation();
      summary.textContent = `${labels.slopes}${colon}${m.map((v) => Number(v.toPrecision(4))).join(comma)}`;
      root.dataset.slopes = JSON.stringify(m);

      ctx.clearRect(0, 0, canvas.width, canvas.height);
      const half = Math.floor((canvas.width - 160) / 2);
      const left = { x: 60, y: 30, w: Math.min(half, 240), h: 240 };
      const right = { x: half + 140, y: 30, w: half, h: 240 };
      // Left: one head's causal bias (future keys left white).
      const lowest = -m[shownHead] * (seq - 1);
      kit.image(ctx, left, seq, seq, (i, j) =>
        j > i ? [255, 255, 255] : kit.viridis(lowest === 0 ? 1 : 1 - b[(shownHead * seq + i) * seq + j] / lowest));
      kit.frame(ctx, left, `${labels.matrix_title} (${shownHead})`, labels.key_axis, labels.query_axis);
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
      kit.frame(ctx, right, labels.lines_title, labels.distance_axis, labels.bias_axis);
      kit.ticks(ctx, right, [[0, "0"], [1, String(seq - 1)]],
        [[0, "0"], [1, Number(floor.toPrecision(3)).toString()]]);
    });

    for (const input of [heads, head, length]) input.addEventListener("input", draw);
    draw();
  }

  kit.register("alibi", { compute }, mount);
})();

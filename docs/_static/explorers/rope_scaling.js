// The RoPE scaling explorer: a scaling type and its parameters on controls; the slow-down of
// every frequency against wavelength / original context (with the bands each method uses), the
// wavelengths before and after against the context windows, and the attention factor.
// inverseFrequencies() follows posenc.rope_inv_freq (the scaling classes of
// posenc/_rope_scaling.py); the browser tests compare it with values exported by the build.
(function () {
  "use strict";

  function baseFrequencies(dim, base) {
    const out = [];
    for (let i = 0; i < dim / 2; i++) out.push(1 / Math.pow(base, (2 * i) / dim));
    return out;
  }

  // p: {type, dim, base, factor, original, seqLen, betaFast, betaSlow, lowFreqFactor,
  //     highFreqFactor, shortFactor, longFactor}. Returns {invFreq, attention}.
  function inverseFrequencies(p) {
    const inv = baseFrequencies(p.dim, p.base);
    const s = p.factor;
    switch (p.type) {
      case "default":
        return { invFreq: inv, attention: 1 };
      case "linear":
        return { invFreq: inv.map((f) => f / s), attention: 1 };
      case "dynamic": {
        const length = Math.max(p.seqLen, p.original);
        const base = p.base * Math.pow((s * length) / p.original - (s - 1), p.dim / (p.dim - 2));
        return { invFreq: baseFrequencies(p.dim, base), attention: 1 };
      }
      case "yarn": {
        const correction = (rotations) =>
          (p.dim * Math.log(p.original / (rotations * 2 * Math.PI))) / (2 * Math.log(p.base));
        let low = Math.floor(correction(p.betaFast));
        let high = Math.ceil(correction(p.betaSlow));
        low = Math.max(low, 0);
        high = Math.min(high, p.dim - 1);
        if (low === high) high += 0.001;
        const out = inv.map((f, i) => {
          const ramp = Math.min(1, Math.max(0, (i - low) / (high - low)));
          return (f / s) * ramp + f * (1 - ramp);
        });
        return { invFreq: out, attention: s <= 1 ? 1 : 0.1 * Math.log(s) + 1 };
      }
      case "llama3": {
        const lowWavelength = p.original / p.lowFreqFactor;
        const highWavelength = p.original / p.highFreqFactor;
        const out = inv.map((f) => {
          const wavelength = (2 * Math.PI) / f;
          const scaled = wavelength > lowWavelength ? f / s : f;
          if (wavelength < highWavelength || wavelength > lowWavelength) return scaled;
          const smooth = (p.original / wavelength - p.lowFreqFactor) / (p.highFreqFactor - p.lowFreqFactor);
          return ((1 - smooth) * scaled) / s + smooth * scaled;
        });
        return { invFreq: out, attention: 1 };
      }
      case "longrope": {
        const ext = p.seqLen > p.original ? p.longFactor : p.shortFactor;
        const attention = s <= 1 ? 1 : Math.sqrt(1 + Math.log(s) / Math.log(p.original));
        return { invFreq: inv.map((f, i) => f / ext[i]), attention };
      }
      default:
        throw new Error(`unknown scaling type ${p.type}`);
    }
  }

  // The page's illustrative LongRoPE lists: 1 for short inputs; for long ones, rising
  // geometrically from 1 (fastest pair) to the factor (slowest pair).
  function longropeLists(dim, factor) {
    const n = dim / 2;
    const shortFactor = new Array(n).fill(1);
    const longFactor = Array.from({ length: n }, (_, i) => Math.pow(factor, i / (n - 1)));
    return { shortFactor, longFactor };
  }

  // ---------------------------------------------------------------- drawing

  const kit = window.posencExplorerKit;

  // Log-scale axis helpers: value -> pixel, and tick labels at powers of ten.
  function logScale(min, max, from, to) {
    const a = Math.log10(min);
    const b = Math.log10(max);
    return (v) => from + ((Math.log10(v) - a) / (b - a)) * (to - from);
  }

  function powerTicks(ctx, min, max, place, horizontal) {
    ctx.fillStyle = "#444";
    ctx.font = "11px sans-serif";
    ctx.textAlign = horizontal ? "center" : "right";
    for (let e = Math.ceil(Math.log10(min)); e <= Math.floor(Math.log10(max)); e++) {
      const text = e >= -2 && e <= 4 ? String(Math.pow(10, e)) : `1e${e}`;
      const [x, y] = place(Math.pow(10, e));
      ctx.fillText(text, x, y);
    }
  }

  function line(ctx, points, colour, dashed) {
    ctx.strokeStyle = colour;
    ctx.lineWidth = 1.5;
    ctx.setLineDash(dashed ? [5, 4] : []);
    ctx.beginPath();
    points.forEach(([x, y], i) => (i === 0 ? ctx.moveTo(x, y) : ctx.lineTo(x, y)));
    ctx.stroke();
    ctx.setLineDash([]);
  }

  const TYPES = ["default", "linear", "dynamic", "yarn", "llama3", "longrope"];
  // Which parameter each type reads.
  const USES = {
    factor: ["linear", "dynamic", "yarn", "llama3", "longrope"],
    original: ["dynamic", "yarn", "llama3", "longrope"],
    seqLen: ["dynamic", "longrope"],
    betas: ["yarn"],
    llama3: ["llama3"],
  };

  function mount(root, labels) {
    const { colon, between } = kit.punctuation();
    const controls = document.createElement("div");
    controls.className = "posenc-explorer-controls";
    root.append(controls);
    // Type names are the rope_type values of a config, shown as they are written there.
    const type = kit.select(TYPES.map((value) => [value, value]));
    type.value = "yarn";
    kit.control(controls, labels.type, type, null);
    const dim = kit.range(16, 256, 2, 128);
    const logBase = kit.range(3, 7, 0.1, 4);
    const factor = kit.range(1, 32, 0.5, 4);
    const logOriginal = kit.range(9, 17, 1, 12);
    const logSeq = kit.range(9, 19, 0.5, 14);
    const betaFast = kit.range(1, 64, 1, 32);
    const betaSlow = kit.range(0.25, 8, 0.25, 1);
    const lowFreq = kit.range(0.5, 4, 0.5, 1);
    const highFreq = kit.range(1, 16, 0.5, 4);
    const rows = {
      dim: kit.control(controls, labels.dim, dim, (v) => String(v)),
      base: kit.control(controls, labels.base, logBase, (v) => Math.round(Math.pow(10, v)).toLocaleString()),
      factor: kit.control(controls, labels.factor, factor, (v) => String(v)),
      original: kit.control(controls, labels.original, logOriginal, (v) => String(Math.pow(2, v))),
      seqLen: kit.control(controls, labels.seq_len, logSeq, (v) => String(Math.round(Math.pow(2, v)))),
      betaFast: kit.control(controls, "beta_fast", betaFast, (v) => String(v)),
      betaSlow: kit.control(controls, "beta_slow", betaSlow, (v) => String(v)),
      lowFreq: kit.control(controls, "low_freq_factor", lowFreq, (v) => String(v)),
      highFreq: kit.control(controls, "high_freq_factor", highFreq, (v) => String(v)),
    };
    const summary = document.createElement("p");
    summary.className = "posenc-explorer-summary";
    root.append(summary);
    const canvas = kit.canvas(root, 340, labels.scale_title);
    const ctx = canvas.getContext("2d");

    function settings() {
      const d = Number(dim.value);
      const s = Number(factor.value);
      return {
        type: type.value,
        dim: d,
        base: Math.pow(10, Number(logBase.value)),
        factor: s,
        original: Math.pow(2, Number(logOriginal.value)),
        seqLen: Math.round(Math.pow(2, Number(logSeq.value))),
        betaFast: Number(betaFast.value),
        betaSlow: Number(betaSlow.value),
        lowFreqFactor: Number(lowFreq.value),
        // high_freq_factor must exceed low_freq_factor (posenc refuses the rest).
        highFreqFactor: Math.max(Number(highFreq.value), Number(lowFreq.value) + 0.5),
        ...longropeLists(d, s),
      };
    }

    const draw = kit.timed(root, () => {
      const p = settings();
      const t = p.type;
      rows.factor.hidden = !USES.factor.includes(t);
      rows.original.hidden = !USES.original.includes(t);
      rows.seqLen.hidden = !USES.seqLen.includes(t);
      rows.betaFast.hidden = rows.betaSlow.hidden = !USES.betas.includes(t);
      rows.lowFreq.hidden = rows.highFreq.hidden = !USES.llama3.includes(t);
      const unscaled = baseFrequencies(p.dim, p.base);
      const { invFreq, attention } = inverseFrequencies(p);
      const slow = unscaled.map((f, i) => f / invFreq[i]);
      const wavelengths = unscaled.map((f) => (2 * Math.PI) / f);
      const after = invFreq.map((f) => (2 * Math.PI) / f);
      const unchanged = slow.filter((v) => Math.abs(v - 1) < 1e-12).length;
      summary.textContent =
        `${labels.attention}${colon}${attention.toFixed(4)}${between}` +
        `${labels.unchanged}${colon}${unchanged} / ${slow.length}`;
      root.dataset.attention = String(attention);
      root.dataset.unchanged = String(unchanged);

      ctx.clearRect(0, 0, canvas.width, canvas.height);
      const half = Math.floor((canvas.width - 160) / 2);
      const left = { x: 60, y: 30, w: half, h: 250 };
      const right = { x: half + 140, y: 30, w: half, h: 250 };

      // Left: slow-down against wavelength / original context (log-log).
      const ratios = wavelengths.map((w) => w / p.original);
      const xMin = Math.min(...ratios) / 1.5;
      const xMax = Math.max(...ratios) * 1.5;
      const yMax = Math.max(2, ...slow) * 1.3;
      const xl = logScale(xMin, xMax, left.x, left.x + left.w);
      const yl = logScale(1 / 1.3, yMax, left.y + left.h, left.y);
      const marks = [1];
      if (t === "yarn") marks.push(1 / p.betaFast, 1 / p.betaSlow);
      if (t === "llama3") marks.push(1 / p.highFreqFactor, 1 / p.lowFreqFactor);
      for (const m of marks) {
        if (m > xMin && m < xMax) line(ctx, [[xl(m), left.y], [xl(m), left.y + left.h]], "#999", true);
      }
      line(ctx, ratios.map((r, i) => [xl(r), yl(slow[i])]), "#1f77b4", false);
      kit.frame(ctx, left, labels.scale_title, labels.ratio_axis, labels.slow_axis);
      powerTicks(ctx, xMin, xMax, (v) => [xl(v), left.y + left.h + 14], true);
      ctx.textAlign = "right";
      ctx.fillStyle = "#444";
      for (let v = 1; v < yMax; v *= 2) ctx.fillText(String(v), left.x - 4, yl(v) + 4);

      // Right: wavelengths by pair index, before and after, with the two context windows.
      const all = wavelengths.concat(after, [p.original, p.original * p.factor]);
      const wMin = Math.min(...all) / 1.5;
      const wMax = Math.max(...all) * 1.5;
      const yr = logScale(wMin, wMax, right.y + right.h, right.y);
      const xr = (i) => right.x + (i / (wavelengths.length - 1)) * right.w;
      for (const [w, dashed] of [[p.original, true], [p.original * p.factor, true]]) {
        line(ctx, [[right.x, yr(w)], [right.x + right.w, yr(w)]], "#999", dashed);
      }
      line(ctx, wavelengths.map((w, i) => [xr(i), yr(w)]), "#7f7f7f", false);
      line(ctx, after.map((w, i) => [xr(i), yr(w)]), "#d62728", false);
      kit.frame(ctx, right, labels.wavelength_title, labels.pair_axis, labels.wavelength_axis);
      powerTicks(ctx, wMin, wMax, (v) => [right.x - 4, yr(v) + 4], false);
      ctx.textAlign = "center";
      ctx.fillText("0", xr(0), right.y + right.h + 14);
      ctx.fillText(String(wavelengths.length - 1), xr(wavelengths.length - 1), right.y + right.h + 14);
      ctx.textAlign = "left";
      ctx.fillStyle = "#555";
      ctx.fillText(labels.context, right.x + 4, yr(p.original) - 4);
      ctx.fillText(labels.extended, right.x + 4, yr(p.original * p.factor) - 4);
    });

    for (const input of [dim, logBase, factor, logOriginal, logSeq, betaFast, betaSlow, lowFreq, highFreq]) {
      input.addEventListener("input", draw);
    }
    type.addEventListener("change", draw);
    draw();
  }

  kit.register("rope_scaling", { compute: inverseFrequencies, longropeLists }, mount);
})();

// Shared pieces of the explorers (docs/_ext/posenc_explorers.py loads this file first):
// controls, canvas frames, a colour ramp, page-language punctuation, mounting.
(function () {
  "use strict";

  function range(min, max, step, value) {
    const input = document.createElement("input");
    Object.assign(input, { type: "range", min, max, step, value });
    return input;
  }

  function select(options) {
    const input = document.createElement("select");
    for (const [value, text] of options) {
      const option = document.createElement("option");
      option.value = value;
      option.textContent = text;
      input.append(option);
    }
    return input;
  }

  // A labelled control; with ``format``, the current value is printed beside it.
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
    return row;
  }

  function canvas(root, height, label) {
    const element = document.createElement("canvas");
    // As wide as the page's content column.
    element.width = Math.max(560, root.clientWidth - 26);
    element.height = height;
    element.setAttribute("role", "img");
    element.setAttribute("aria-label", label);
    root.append(element);
    return element;
  }

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

  // Tick labels: xTicks/yTicks are [fraction of the axis, text] pairs (y fraction 0 = top).
  function ticks(ctx, box, xTicks, yTicks) {
    ctx.fillStyle = "#444";
    ctx.font = "11px sans-serif";
    ctx.textAlign = "center";
    for (const [fx, text] of xTicks) ctx.fillText(text, box.x + fx * box.w, box.y + box.h + 14);
    ctx.textAlign = "right";
    for (const [fy, text] of yTicks) ctx.fillText(text, box.x - 4, box.y + fy * box.h + 4);
  }

  // A viridis-like ramp for t in [0, 1].
  function viridis(t) {
    const stops = [[68, 1, 84], [59, 82, 139], [33, 145, 140], [94, 201, 98], [253, 231, 37]];
    const x = Math.max(0, Math.min(1, t)) * (stops.length - 1);
    const i = Math.min(Math.floor(x), stops.length - 2);
    const w = x - i;
    return stops[i].map((c, k) => Math.round(c + (stops[i + 1][k] - c) * w));
  }

  // Draw an (rows x cols) image given the colour of each cell, scaled into ``box``.
  function image(ctx, box, rows, cols, colourOf) {
    const data = ctx.createImageData(cols, rows);
    for (let i = 0; i < rows; i++) {
      for (let j = 0; j < cols; j++) data.data.set([...colourOf(i, j), 255], 4 * (i * cols + j));
    }
    const off = document.createElement("canvas");
    off.width = cols;
    off.height = rows;
    off.getContext("2d").putImageData(data, 0, 0);
    ctx.imageSmoothingEnabled = false;
    ctx.drawImage(off, box.x, box.y, box.w, box.h);
  }

  // Full-width punctuation on Chinese pages, as in the page text.
  function punctuation() {
    return document.documentElement.lang.startsWith("zh")
      ? { colon: "：", between: "；", comma: "，" }
      : { colon: ": ", between: " · ", comma: ", " };
  }

  // Time a drawing and count it (the browser tests read both).
  function timed(root, draw) {
    return () => {
      const start = performance.now();
      draw();
      root.dataset.drawMs = (performance.now() - start).toFixed(2);
      root.dataset.draws = String(Number(root.dataset.draws || 0) + 1);
    };
  }

  function register(name, api, mount) {
    window.posencExplorers = Object.assign(window.posencExplorers || {}, { [name]: api });
    document.addEventListener("DOMContentLoaded", () => {
      for (const root of document.querySelectorAll(`.posenc-explorer[data-explorer="${name}"]`)) {
        mount(root, JSON.parse(root.dataset.labels));
        root.dataset.firstDrawMs = root.dataset.drawMs;
      }
    });
  }

  window.posencExplorerKit = { range, select, control, canvas, frame, ticks, viridis, image, punctuation, timed, register };
})();

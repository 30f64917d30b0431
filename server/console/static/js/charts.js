// Charts drawn on <canvas>, no library: stacked bars and lines, each with a legend and the numbers in a
// table under it (what a screen reader or a test reads).

import {h, table} from "./dom.js";

export const TYPE_COLORS = {EPISODIC: "#d9822b", SEMANTIC: "#2b6cb0", PROCEDURAL: "#2f855a"};
const PALETTE = ["#2b6cb0", "#d9822b", "#2f855a", "#b83280", "#805ad5", "#c05621", "#319795", "#718096"];
const FONT = "12px system-ui, sans-serif";

export function colorFor(name, i) {
  return TYPE_COLORS[name] || PALETTE[i % PALETTE.length];
}

function niceMax(value) {
  if (!(value > 0)) return 1;
  const p = 10 ** Math.floor(Math.log10(value));
  for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= value) return m * p;
  return 10 * p;
}

function setup(canvas, width, height) {
  const ratio = window.devicePixelRatio || 1;
  canvas.width = Math.round(width * ratio);
  canvas.height = Math.round(height * ratio);
  canvas.style.width = `${width}px`;
  canvas.style.maxWidth = "100%";
  const ctx = canvas.getContext("2d");
  ctx.scale(ratio, ratio);
  ctx.font = FONT;
  ctx.clearRect(0, 0, width, height);
  return ctx;
}

function axes(ctx, box, yMax, yLabel, ticks = 4, yFormat = (v) => String(+v.toFixed(3))) {
  ctx.strokeStyle = "#cbd5e0";
  ctx.fillStyle = "#4a5568";
  ctx.textAlign = "right";
  ctx.textBaseline = "middle";
  for (let i = 0; i <= ticks; i++) {
    const v = (yMax * i) / ticks;
    const y = box.y + box.h - (box.h * i) / ticks;
    ctx.beginPath();
    ctx.moveTo(box.x, y);
    ctx.lineTo(box.x + box.w, y);
    ctx.stroke();
    ctx.fillText(yFormat(v), box.x - 6, y);
  }
  ctx.save();
  ctx.translate(12, box.y + box.h / 2);
  ctx.rotate(-Math.PI / 2);
  ctx.textAlign = "center";
  ctx.fillText(yLabel, 0, 0);
  ctx.restore();
}

function xLabels(ctx, box, labels, every) {
  ctx.fillStyle = "#4a5568";
  ctx.textAlign = "center";
  ctx.textBaseline = "top";
  labels.forEach((text, i) => {
    if (i % every !== 0) return;
    ctx.fillText(text, box.x + (box.w * (i + 0.5)) / labels.length, box.y + box.h + 6);
  });
}

export function legend(names) {
  return h("div", {class: "legend"}, names.map((name, i) => {
    const swatch = h("span", {class: "swatch"});
    swatch.style.background = colorFor(name, i);
    return h("span", {}, swatch, ` ${name.toLowerCase()}`);
  }));
}

// Bars per label, one segment per series, stacked.
export function stackedBars({labels, series, yLabel, width = 760, height = 260, ariaLabel}) {
  const canvas = h("canvas", {"aria-label": ariaLabel || yLabel, role: "img"});
  const names = Object.keys(series);
  const ctx = setup(canvas, width, height);
  const box = {x: 56, y: 12, w: width - 70, h: height - 48};
  const totals = labels.map((_, i) => names.reduce((sum, n) => sum + (series[n][i] || 0), 0));
  const yMax = niceMax(Math.max(0, ...totals));
  axes(ctx, box, yMax, yLabel);
  const slot = box.w / Math.max(1, labels.length);
  const bar = Math.max(1, slot * 0.8);
  labels.forEach((_, i) => {
    let base = 0;
    names.forEach((name, k) => {
      const v = series[name][i] || 0;
      if (v <= 0) return;
      ctx.fillStyle = colorFor(name, k);
      const y0 = box.y + box.h - (box.h * base) / yMax;
      const y1 = box.y + box.h - (box.h * (base + v)) / yMax;
      ctx.fillRect(box.x + slot * i + (slot - bar) / 2, y1, bar, y0 - y1);
      base += v;
    });
  });
  xLabels(ctx, box, labels, Math.max(1, Math.ceil(labels.length / 8)));
  const rows = labels.map((label, i) => h("tr", {}, h("td", {}, label), names.map((n) => h("td", {}, series[n][i]))));
  return h("figure", {class: "chart"}, canvas, legend(names),
    h("details", {}, h("summary", {}, "numbers"), table(["", ...names.map((n) => n.toLowerCase())], rows)));
}

// Lines over a shared x axis.
export function lineChart({x, series, xLabel, yLabel, yMax = null, xFormat = String, width = 760, height = 260,
                           ariaLabel}) {
  const canvas = h("canvas", {"aria-label": ariaLabel || yLabel, role: "img"});
  const names = Object.keys(series);
  const ctx = setup(canvas, width, height);
  const box = {x: 56, y: 12, w: width - 70, h: height - 56};
  const top = yMax ?? niceMax(Math.max(0, ...names.flatMap((n) => series[n])));
  axes(ctx, box, top, yLabel);
  const xMin = x[0];
  const xMax = x[x.length - 1];
  const px = (v) => box.x + (box.w * (v - xMin)) / Math.max(1e-9, xMax - xMin);
  const py = (v) => box.y + box.h - (box.h * Math.min(v, top)) / top;
  names.forEach((name, k) => {
    ctx.strokeStyle = colorFor(name, k);
    ctx.lineWidth = 2;
    ctx.beginPath();
    series[name].forEach((v, i) => (i ? ctx.lineTo(px(x[i]), py(v)) : ctx.moveTo(px(x[i]), py(v))));
    ctx.stroke();
  });
  ctx.lineWidth = 1;
  ctx.fillStyle = "#4a5568";
  ctx.textAlign = "center";
  ctx.textBaseline = "top";
  for (let i = 0; i <= 6; i++) {
    const v = xMin + ((xMax - xMin) * i) / 6;
    ctx.fillText(xFormat(v), px(v), box.y + box.h + 6);
  }
  ctx.fillText(xLabel, box.x + box.w / 2, box.y + box.h + 24);
  const step = Math.max(1, Math.floor(x.length / 12));
  const rows = x.filter((_, i) => i % step === 0).map((v, j) =>
    h("tr", {}, h("td", {}, xFormat(v)), names.map((n) => h("td", {}, series[n][j * step].toFixed(4)))));
  return h("figure", {class: "chart"}, canvas, legend(names),
    h("details", {}, h("summary", {}, "numbers"), table([xLabel, ...names.map((n) => n.toLowerCase())], rows)));
}


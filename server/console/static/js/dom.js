// DOM building without HTML strings: every value lands as a text node or an attribute, never as markup,
// so memory content (user text) always renders as text. Links may only point inside the console (#/...).

const SAFE_ATTRS = new Set(["id", "class", "href", "type", "name", "value", "placeholder", "for", "title",
  "min", "max", "step", "role", "colspan", "width", "height", "aria-label", "aria-live", "data-field",
  "data-id", "data-status", "data-test", "autocomplete", "rows", "spellcheck", "open"]);

export function h(tag, props = {}, ...children) {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(props || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (name === "on") {
      for (const [event, fn] of Object.entries(value)) el.addEventListener(event, fn);
    } else if (name === "checked" || name === "disabled" || name === "selected" || name === "required"
               || name === "multiple") {
      el[name] = Boolean(value);
    } else if (name === "href") {
      const href = String(value);
      if (!href.startsWith("#")) throw new Error(`console links stay inside the console: ${href}`);
      el.setAttribute("href", href);
    } else if (SAFE_ATTRS.has(name) || name.startsWith("data-")) {
      el.setAttribute(name, value === true ? "" : String(value));
    } else {
      throw new Error(`attribute not allowed: ${name}`);
    }
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    if (Array.isArray(child)) append(el, child);
    else if (child instanceof Node) el.appendChild(child);
    else el.appendChild(document.createTextNode(String(child)));
  }
}

export const enc = encodeURIComponent;

export function tenantHref(tenant, page = "", params = null) {
  let href = `#/t/${enc(tenant)}${page ? "/" + page : ""}`;
  if (params) {
    const qs = new URLSearchParams();
    for (const [k, v] of Object.entries(params)) {
      for (const x of Array.isArray(v) ? v : [v]) if (x !== "" && x !== null && x !== undefined) qs.append(k, x);
    }
    if ([...qs].length) href += "?" + qs.toString();
  }
  return href;
}

export function memoryHref(tenant, id) {
  return `#/t/${enc(tenant)}/memory/${enc(id)}`;
}

export function fmtTime(ms) {
  if (!ms) return "—";
  const d = new Date(ms);
  return d.toISOString().replace("T", " ").replace(/\.\d+Z$/, "Z");
}

export function fmtAge(ms, now = Date.now()) {
  if (!ms) return "—";
  const s = Math.max(0, (now - ms) / 1000);
  if (s < 90) return `${Math.round(s)} s ago`;
  if (s < 5400) return `${Math.round(s / 60)} min ago`;
  if (s < 129600) return `${Math.round(s / 3600)} h ago`;
  return `${Math.round(s / 86400)} d ago`;
}

export function fmtNum(value, digits = 3) {
  if (value === null || value === undefined) return "—";
  if (typeof value !== "number") return String(value);
  if (Number.isInteger(value)) return String(value);
  return value.toFixed(digits);
}

export function fmtBytes(n) {
  if (!n && n !== 0) return "—";
  if (n < 1024) return `${n} B`;
  if (n < 1 << 20) return `${(n / 1024).toFixed(1)} KiB`;
  if (n < 1 << 30) return `${(n / (1 << 20)).toFixed(1)} MiB`;
  return `${(n / (1 << 30)).toFixed(2)} GiB`;
}

// A field of a domain object as text: *_ms as a UTC time, lists joined, objects as key=value.
export function fmtField(name, value) {
  if (value === null || value === undefined || value === "") return "—";
  if (name.endsWith("_ms") && typeof value === "number") return value ? `${fmtTime(value)} (${value})` : "0";
  if (Array.isArray(value)) return value.length ? value.map((v) => typeof v === "object" ? JSON.stringify(v) : v).join(", ") : "—";
  if (typeof value === "object") {
    const entries = Object.entries(value);
    return entries.length ? entries.map(([k, v]) => `${k}=${v}`).join(", ") : "—";
  }
  if (typeof value === "number") return fmtNum(value, 4);
  return String(value);
}

export function table(headers, rows, props = {}) {
  return h("table", props,
    h("thead", {}, h("tr", {}, headers.map((x) => h("th", {}, x)))),
    h("tbody", {}, rows));
}

export function chip(text, kind = "") {
  return h("span", {class: `chip ${kind}`.trim()}, text);
}

export function statusChip(status) {
  return h("span", {class: `chip status-${String(status).toLowerCase()}`, "data-status": status}, status);
}

export function errorBox(error) {
  return h("div", {class: "error", role: "alert"}, `${error.code || "ERROR"}: ${error.message || error}`);
}

export function checkboxes(name, options, chosen) {
  return h("span", {class: "checks"}, options.map((opt) =>
    h("label", {}, h("input", {type: "checkbox", name, value: opt, checked: chosen.includes(opt)}), ` ${opt.toLowerCase()}`)));
}

export function field(label, input) {
  return h("label", {class: "field"}, h("span", {}, label), input);
}

export function formValues(form) {
  const data = new FormData(form);
  const out = {};
  for (const [k, v] of data.entries()) {
    if (k in out) out[k] = [].concat(out[k], v);
    else out[k] = v;
  }
  return out;
}

export function list(value) {
  if (value === undefined || value === null || value === "") return [];
  return Array.isArray(value) ? value : [value];
}

// datetime-local input value (UTC) <-> Unix ms
export function msFromInput(value) {
  if (!value) return "";
  const ms = Date.parse(value.length === 16 ? `${value}:00Z` : `${value}Z`);
  return Number.isNaN(ms) ? "" : String(ms);
}

export function inputFromMs(ms) {
  if (!ms) return "";
  return new Date(Number(ms)).toISOString().slice(0, 16);
}

const dialog = () => document.getElementById("confirm-dialog");

// A confirmation step: resolves true only when the user presses the dialog's confirm button.
export function confirmStep(text, okLabel = "Confirm") {
  const d = dialog();
  document.getElementById("confirm-text").textContent = text;
  const ok = document.getElementById("confirm-ok");
  const cancel = document.getElementById("confirm-cancel");
  ok.textContent = okLabel;
  return new Promise((resolve) => {
    const done = (answer) => {
      ok.removeEventListener("click", yes);
      cancel.removeEventListener("click", no);
      d.removeEventListener("cancel", no);
      d.close();
      resolve(answer);
    };
    const yes = () => done(true);
    const no = () => done(false);
    ok.addEventListener("click", yes);
    cancel.addEventListener("click", no);
    d.addEventListener("cancel", no);
    d.showModal();
  });
}

// The console's JSON API, same origin only. The session is an HttpOnly cookie this script cannot read;
// the CSRF token lives in this module's memory (never in storage) and goes out on every POST.

let csrf = "";

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

async function request(method, path, {params = null, body = null} = {}) {
  const url = new URL(path, window.location.origin);
  for (const [name, value] of Object.entries(params || {})) {
    for (const v of Array.isArray(value) ? value : [value]) {
      if (v !== undefined && v !== null && v !== "") url.searchParams.append(name, v);
    }
  }
  const init = {method, credentials: "same-origin", cache: "no-store", headers: {Accept: "application/json"}};
  if (method === "POST") {
    init.headers["Content-Type"] = "application/json";
    init.headers["X-CSRF-Token"] = csrf;
    init.body = JSON.stringify(body || {});
  }
  const response = await fetch(url, init);
  const data = await response.json().catch(() => ({}));
  if (!response.ok) {
    const error = data.error || {};
    throw new ApiError(response.status, error.code || String(response.status), error.message || response.statusText);
  }
  return data;
}

export const get = (path, params) => request("GET", path, {params});
export const post = (path, body) => request("POST", path, {body});

export async function login(key) {
  const reply = await post("/api/login", {key});
  csrf = reply.csrf;
  return reply;
}

export async function session() {
  const reply = await get("/api/session");
  csrf = reply.csrf;
  return reply;
}

export async function logout() {
  try {
    await post("/api/logout", {});
  } finally {
    csrf = "";
  }
}

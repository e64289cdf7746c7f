// The console's access to the management REST API: every call carries the signed-in user's Basic credentials
// (kept in sessionStorage, so they last as long as the tab) and the `ns-server-ui: yes` header (the server then
// leaves the browser's own login dialog out of a 401). Also the small DOM helpers every view uses; data is only
// ever put into the page as text, never as HTML.
'use strict';

class ApiError extends Error {
  constructor(status, message, body) {
    super(message);
    this.status = status;
    this.body = body;
  }
}

const Api = {
  storageKey: 'settee.auth',

  credentials() {
    return sessionStorage.getItem(this.storageKey);
  },

  user() {
    const c = this.credentials();
    return c ? atob(c).split(':')[0] : '';
  },

  forget() {
    sessionStorage.removeItem(this.storageKey);
  },

  // Checks the credentials with `/whoami` and keeps them when they are right; throws an ApiError when not.
  async login(user, password) {
    const token = btoa(unescape(encodeURIComponent(user + ':' + password)));
    const me = await this.request('GET', '/whoami', undefined, token);
    sessionStorage.setItem(this.storageKey, token);
    return me;
  },

  // One call: `body` is an object sent as a urlencoded form, or a string sent as is. Answers the parsed JSON (or
  // text); throws an ApiError for any status but 2xx. A 401 signs the user out (the credentials stopped working).
  async request(method, path, body, token) {
    const headers = { 'ns-server-ui': 'yes', 'Accept': 'application/json' };
    const auth = token || this.credentials();
    if (auth) headers['Authorization'] = 'Basic ' + auth;
    let payload;
    if (body !== undefined) {
      headers['Content-Type'] = 'application/x-www-form-urlencoded';
      payload = typeof body === 'string' ? body : new URLSearchParams(body).toString();
    }
    const response = await fetch(path, { method, headers, body: payload, credentials: 'omit', cache: 'no-store' });
    const text = await response.text();
    let parsed = text;
    try { parsed = text ? JSON.parse(text) : null; } catch (e) { /* a text answer */ }
    if (!response.ok) {
      if (response.status === 401 && !token) {
        this.forget();
        window.dispatchEvent(new Event('settee-signed-out'));
      }
      throw new ApiError(response.status, describe(response.status, parsed), parsed);
    }
    return parsed;
  },

  get(path) { return this.request('GET', path); },
  post(path, body) { return this.request('POST', path, body === undefined ? '' : body); },
  del(path) { return this.request('DELETE', path); },

  // A SQL++ statement through the management port's query proxy (Couchbase's `/_p/query/query/service`).
  query(statement, extra) {
    return this.request('POST', '/_p/query/query/service', Object.assign({ statement }, extra || {}));
  },
};

// A readable message for a failed call, from the shapes ns_server and the query service answer with.
function describe(status, body) {
  if (status === 401) return 'Wrong user name or password.';
  if (body && typeof body === 'object') {
    if (body.errors) {
      if (Array.isArray(body.errors)) return body.errors.map(e => e.msg || JSON.stringify(e)).join('\n');
      return Object.values(body.errors).join('\n');
    }
    if (body.message) return body.message + (body.permissions ? ': ' + body.permissions.join(', ') : '');
    if (body.reason) return body.reason;
  }
  if (typeof body === 'string' && body.trim()) return body.trim();
  return 'HTTP ' + status;
}

// el('td', {class: 'num'}, 'text', child...): an element with attributes and children (strings become text).
function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on')) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v === true ? '' : v);
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null) continue;
    node.appendChild(typeof c === 'string' || typeof c === 'number' ? document.createTextNode(String(c)) : c);
  }
  return node;
}

function table(headers, rows, attrs) {
  return el('table', attrs,
    el('thead', {}, el('tr', {}, headers.map(h => el('th', typeof h === 'object' ? h.attrs : {}, typeof h === 'object' ? h.label : h)))),
    el('tbody', {}, rows));
}

function card(label, value, attrs) {
  return el('div', Object.assign({ class: 'card' }, attrs || {}), el('div', { class: 'label' }, label), el('div', { class: 'value' }, value));
}

function bytes(n) {
  if (n === undefined || n === null || isNaN(n)) return '-';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return (i === 0 ? n.toFixed(0) : n.toFixed(1)) + ' ' + units[i];
}

function micros(us) {
  if (us === undefined || us === null) return '-';
  if (us < 1000) return us.toFixed(0) + ' µs';
  if (us < 1e6) return (us / 1000).toFixed(1) + ' ms';
  return (us / 1e6).toFixed(2) + ' s';
}

function number(n, digits) {
  if (n === undefined || n === null || isNaN(n)) return '-';
  return Number(n).toLocaleString('en-US', { maximumFractionDigits: digits === undefined ? 0 : digits });
}

// Backticks a name for SQL++.
function ident(name) {
  return '`' + String(name).replace(/`/g, '``') + '`';
}

// The path of one document through the REST document endpoint.
function docPath(bucket, scope, collection, id) {
  const e = encodeURIComponent;
  return `/pools/default/buckets/${e(bucket)}/scopes/${e(scope)}/collections/${e(collection)}/docs/${e(id)}`;
}

// The views, by route name; each view file adds its own: `Views.name = { title, render(root) }`, where render
// fills `root` and returns a function that stops its timers when the user leaves the view.
const Views = {};

// Runs `tick` now and every `ms` until the returned stop function is called; a failed tick shows its error in
// `errorNode` and the next tick tries again.
function every(ms, tick, errorNode) {
  let stopped = false;
  let timer = null;
  const run = async () => {
    if (stopped) return;
    try {
      await tick();
      if (errorNode) errorNode.textContent = '';
    } catch (e) {
      if (errorNode) errorNode.textContent = e.message;
    }
    if (!stopped) timer = setTimeout(run, ms);
  };
  run();
  return () => { stopped = true; clearTimeout(timer); };
}

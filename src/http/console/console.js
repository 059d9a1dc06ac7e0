/*
 * console.js: mayfly's TTL console (served at /console.js by the HTTP port).
 *
 * Polls GET /api/ttl every POLL_MS and updates the page in place: the table
 * of TTL indexes (rows keyed by db, collection and index name, so an edit in
 * progress in a row's expireAfterSeconds input survives a refresh), the
 * deletions-per-second figure and its recent history, and the lateness
 * histogram (inline SVG). The create form POSTs /api/ttl, each row's Apply
 * PATCHes it; a failure shows the server's message (MongoDB's errmsg) in the
 * role="alert" box. Plain DOM, no framework, no request leaves this server.
 */
'use strict';

(() => {
  const API = '/api/ttl';
  const POLL_MS = 1500;
  const HISTORY = 120; /* deletions-per-second samples kept for the sparkline (3 minutes) */
  const SVG_NS = 'http://www.w3.org/2000/svg';

  const $ = (id) => document.getElementById(id);
  const els = {
    status: $('status'), alert: $('alert'), notice: $('notice'),
    dps: $('dps'), dpsChart: $('dps-chart'), dpsPeak: $('dps-peak'), deleted: $('deleted'), passes: $('passes'),
    hist: $('lateness-chart'), p50: $('p50'), p99: $('p99'), max: $('max'), lcount: $('lcount'),
    rows: $('index-rows'), count: $('index-count'), create: $('create'),
  };

  const rowsByKey = new Map();
  const dpsHistory = [];
  let timer = null;
  let inFlight = false;
  let pollAgain = false;
  let alertFromPoll = false;

  /* ---------- talking to the server ---------- */

  class ApiError extends Error {
    constructor(message, status, code, codeName) {
      super(message);
      this.status = status;
      this.code = code;
      this.codeName = codeName;
      this.fromServer = code !== undefined;
    }
  }

  async function api(method, body) {
    const init = { method, cache: 'no-store', credentials: 'same-origin', headers: {} };
    if (body !== undefined) {
      init.headers['Content-Type'] = 'application/json';
      init.body = JSON.stringify(body);
    }
    const res = await fetch(API, init);
    const text = await res.text();
    let data = null;
    try { data = text ? JSON.parse(text) : null; } catch (_) { data = null; }
    if (data && typeof data.error === 'string') {
      throw new ApiError(data.error, res.status, data.code, data.codeName);
    }
    if (!res.ok) {
      const detail = text && !data ? `: ${text.trim().slice(0, 300)}` : '';
      throw new ApiError(`HTTP ${res.status} ${res.statusText}${detail}`, res.status);
    }
    return data || {};
  }

  /* ---------- messages ---------- */

  function showError(what, err) {
    els.notice.hidden = true;
    els.alert.replaceChildren();
    const head = document.createElement('strong');
    head.textContent = what;
    const msg = document.createElement('span');
    msg.className = 'errmsg';
    msg.textContent = err.message;
    els.alert.append(head, ' ', msg);
    if (err.code !== undefined || err.codeName) {
      const code = document.createElement('span');
      code.className = 'code';
      code.textContent = `code ${err.code}${err.codeName ? ' ' + err.codeName : ''}`;
      els.alert.append(' ', code);
    }
    const close = document.createElement('button');
    close.type = 'button';
    close.className = 'close';
    close.setAttribute('aria-label', 'Dismiss');
    close.textContent = '×';
    close.addEventListener('click', clearError);
    els.alert.append(close);
    els.alert.hidden = false;
  }

  function clearError() {
    els.alert.hidden = true;
    els.alert.replaceChildren();
    alertFromPoll = false;
  }

  function showNotice(text) {
    els.notice.textContent = text;
    els.notice.hidden = false;
  }

  /* ---------- formatting ---------- */

  const pad = (n, w = 2) => String(n).padStart(w, '0');

  /* An absolute local date with the year: "2025-06-01 14:03:07". */
  function fmtDate(d) {
    return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ` +
      `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
  }

  /* A rough length of time: 45 s, 12 min, 3 h, 5 d, 2 y. */
  function fmtSpan(ms) {
    const s = Math.abs(ms) / 1000;
    if (s < 1) return 'now';
    if (s < 90) return `${Math.round(s)} s`;
    if (s < 90 * 60) return `${Math.round(s / 60)} min`;
    if (s < 36 * 3600) return `${Math.round(s / 3600)} h`;
    if (s < 400 * 86400) return `${Math.round(s / 86400)} d`;
    return `${(s / (365.25 * 86400)).toFixed(1).replace(/\.0$/, '')} y`;
  }

  /* A bucket bound in milliseconds: 512ms, 1s, 4.1s, 2min, 1.2h. */
  function fmtMs(v) {
    if (v < 1000) return `${v}ms`;
    if (v < 60000) return `${+(v / 1000).toFixed(v < 10000 ? 1 : 0)}s`;
    if (v < 3600000) return `${+(v / 60000).toFixed(v < 600000 ? 1 : 0)}min`;
    return `${+(v / 3600000).toFixed(1)}h`;
  }

  function fmtDuration(ms) {
    if (typeof ms !== 'number' || !Number.isFinite(ms)) return '–';
    if (ms < 1000) return `${+ms.toFixed(ms < 10 ? 2 : 0)} ms`;
    return fmtMs(Math.round(ms)).replace(/([0-9.])([a-z])/, '$1 $2');
  }

  function fmtCount(n) {
    return typeof n === 'number' && Number.isFinite(n) ? n.toLocaleString() : '–';
  }

  function fmtRate(n) {
    if (typeof n !== 'number' || !Number.isFinite(n)) return '–';
    return n >= 100 ? String(Math.round(n)) : String(+n.toFixed(1));
  }

  /* expireAfterSeconds as a person reads it, next to the input. */
  function fmtSeconds(s) {
    if (typeof s !== 'number' || !Number.isFinite(s)) return '';
    if (s === 0) return 'at the date';
    const units = [[86400 * 365, 'y'], [86400, 'd'], [3600, 'h'], [60, 'min'], [1, 's']];
    for (const [u, name] of units) {
      if (s >= u && s % u === 0) return `${s / u} ${name}`;
    }
    return fmtSpan(s * 1000);
  }

  /* ---------- the table ---------- */

  const rowKey = (ix) => JSON.stringify([ix.db, ix.collection, ix.name]);

  function keyText(key) {
    if (!key || typeof key !== 'object') return String(key);
    return Object.entries(key).map(([f, dir]) => (dir === -1 ? `${f} (descending)` : f)).join(', ');
  }

  function cell(label, cls) {
    const td = document.createElement('td');
    td.dataset.label = label;
    if (cls) td.className = cls;
    return td;
  }

  function makeRow(ix) {
    const tr = document.createElement('tr');
    tr.className = 'index';
    tr.dataset.db = ix.db;
    tr.dataset.collection = ix.collection;
    tr.dataset.name = ix.name;

    const c = {
      db: cell('Database', 'db'),
      collection: cell('Collection', 'collection'),
      name: cell('Index', 'name'),
      key: cell('Key', 'key'),
      expire: cell('expireAfterSeconds', 'expire'),
      archive: cell('Archive', 'archive'),
      due: cell('Next due', 'due'),
      backlog: cell('Backlog', 'backlog num'),
    };

    const form = document.createElement('form');
    form.className = 'row-edit';
    const input = document.createElement('input');
    input.name = 'expireAfterSeconds';
    input.type = 'number';
    input.step = '1';
    input.required = true;
    input.inputMode = 'numeric';
    input.setAttribute('aria-label', `expireAfterSeconds of ${ix.db}.${ix.collection} ${ix.name}`);
    const apply = document.createElement('button');
    apply.type = 'submit';
    apply.className = 'apply';
    apply.textContent = 'Apply';
    const human = document.createElement('span');
    human.className = 'human';
    form.append(input, apply, human);
    c.expire.append(form);

    input.addEventListener('input', () => {
      input.dataset.dirty = input.value !== input.dataset.current ? '1' : '';
    });
    form.addEventListener('submit', (ev) => {
      ev.preventDefault();
      changeExpire(tr, input, apply);
    });

    const when = document.createElement('span');
    when.className = 'when';
    const time = document.createElement('time');
    const rel = document.createElement('span');
    rel.className = 'rel';
    when.append(time, rel);
    c.due.append(when);

    tr.append(c.db, c.collection, c.name, c.key, c.expire, c.archive, c.due, c.backlog);
    return { tr, c, input, human, time, rel };
  }

  function updateRow(r, ix) {
    r.c.db.textContent = ix.db;
    r.c.collection.textContent = ix.collection;
    r.c.name.textContent = ix.name;
    r.c.key.textContent = keyText(ix.key);
    r.c.archive.textContent = ix.archive ? 'yes' : 'no';

    const secs = ix.expireAfterSeconds;
    const current = secs === undefined || secs === null ? '' : String(secs);
    r.input.dataset.current = current;
    /* Leave a value the user is typing alone; otherwise follow the server. */
    if (document.activeElement !== r.input && r.input.dataset.dirty !== '1') r.input.value = current;
    r.human.textContent = fmtSeconds(secs);

    if (ix.nextDueAt) {
      const d = new Date(ix.nextDueAt);
      const valid = !Number.isNaN(d.getTime());
      r.time.dateTime = ix.nextDueAt;
      r.time.title = valid ? `${d.toISOString()} (shown in local time)` : ix.nextDueAt;
      r.time.textContent = valid ? fmtDate(d) : ix.nextDueAt;
      if (valid) {
        const delta = d.getTime() - Date.now();
        r.rel.textContent = Math.abs(delta) < 1000 ? 'due now'
          : delta < 0 ? `due ${fmtSpan(delta)} ago` : `in ${fmtSpan(delta)}`;
        r.tr.classList.toggle('overdue', delta <= 0);
      } else {
        r.rel.textContent = '';
      }
    } else {
      r.time.removeAttribute('datetime');
      r.time.title = 'No document in this collection has a date in the indexed field';
      r.time.textContent = '—';
      r.rel.textContent = '';
      r.tr.classList.remove('overdue');
    }

    const backlog = typeof ix.backlog === 'number' ? ix.backlog : 0;
    r.c.backlog.textContent = String(backlog);
    r.c.backlog.classList.toggle('hot', backlog > 0);
  }

  function renderIndexes(list) {
    const sorted = [...list].sort((a, b) =>
      a.db.localeCompare(b.db) || a.collection.localeCompare(b.collection) || a.name.localeCompare(b.name));
    const seen = new Set();
    const order = [];
    for (const ix of sorted) {
      const k = rowKey(ix);
      seen.add(k);
      let r = rowsByKey.get(k);
      if (!r) {
        r = makeRow(ix);
        rowsByKey.set(k, r);
      }
      updateRow(r, ix);
      order.push(r.tr);
    }
    for (const [k, r] of rowsByKey) {
      if (!seen.has(k)) {
        r.tr.remove();
        rowsByKey.delete(k);
      }
    }
    if (order.length === 0) {
      const tr = document.createElement('tr');
      tr.className = 'empty';
      const td = document.createElement('td');
      td.colSpan = 8;
      td.textContent = 'No TTL index yet. Create one below, or with createIndex({field: 1}, {expireAfterSeconds: N}).';
      tr.append(td);
      els.rows.replaceChildren(tr);
    } else {
      /* Reorder only when needed: moving a row would take the focus off its input. */
      const cur = [...els.rows.children];
      if (cur.length !== order.length || cur.some((tr, i) => tr !== order[i])) els.rows.replaceChildren(...order);
    }
    els.count.textContent = `(${order.length})`;
  }

  /* ---------- charts ---------- */

  function svg(tag, attrs, text) {
    const e = document.createElementNS(SVG_NS, tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
    if (text !== undefined) e.textContent = text;
    return e;
  }

  function renderSparkline(values) {
    const W = 300, H = 110, PAD = 3;
    const peak = Math.max(1, ...values);
    const n = HISTORY;
    const x = (i) => ((i + n - values.length) / (n - 1)) * W;
    const y = (v) => H - PAD - (v / peak) * (H - 2 * PAD);
    const kids = [svg('line', { x1: 0, y1: H - PAD, x2: W, y2: H - PAD, class: 'axis' })];
    if (values.length > 1) {
      const pts = values.map((v, i) => `${x(i).toFixed(1)},${y(v).toFixed(1)}`);
      kids.push(svg('polygon', {
        points: `${x(0).toFixed(1)},${H - PAD} ${pts.join(' ')} ${x(values.length - 1).toFixed(1)},${H - PAD}`,
        class: 'area',
      }));
      kids.push(svg('polyline', { points: pts.join(' '), class: 'line', 'vector-effect': 'non-scaling-stroke' }));
    }
    els.dpsPeak.textContent = fmtRate(Math.max(0, ...values));
    const title = svg('title', {}, `Deletions per second, one sample every ${POLL_MS / 1000} s`);
    els.dpsChart.replaceChildren(title, ...kids);
  }

  /* A bar's count in a few characters: 7, 950, 1.2k, 15k, 3.4M. */
  function shortCount(n) {
    if (n < 1000) return String(n);
    if (n < 1e6) return `${+(n / 1000).toFixed(n < 10000 ? 1 : 0)}k`;
    return `${+(n / 1e6).toFixed(n < 1e7 ? 1 : 0)}M`;
  }

  /* The lateness histogram: one bar per power-of-two bucket, from the smallest present to the largest. */
  function renderHistogram(hist) {
    const W = 300, BASE = 100, TOP = 14;
    const buckets = [];
    for (const [k, v] of Object.entries(hist || {})) {
      const m = /^lt(\d+)ms$/.exec(k);
      if (m && typeof v === 'number') buckets.push({ exp: Math.round(Math.log2(Number(m[1]))), count: v });
    }
    if (buckets.length === 0 || buckets.every((b) => b.count === 0)) {
      els.hist.replaceChildren(
        svg('line', { x1: 0, y1: BASE, x2: W, y2: BASE, class: 'axis' }),
        svg('text', { x: W / 2, y: BASE / 2, 'text-anchor': 'middle', class: 'placeholder' }, 'No deletions yet'));
      return;
    }
    const byExp = new Map(buckets.map((b) => [b.exp, b.count]));
    const lo = Math.min(...byExp.keys());
    const hi = Math.max(...byExp.keys());
    const n = hi - lo + 1;
    const peak = Math.max(...byExp.values());
    const slot = W / n;
    const gap = Math.min(4, slot * 0.2);
    const labelEvery = Math.ceil(n / 8);
    const kids = [];
    for (let i = 0; i < n; i++) {
      const exp = lo + i;
      const count = byExp.get(exp) || 0;
      /* Logarithmic heights: a handful of very late deletions stays visible beside thousands of prompt ones. */
      const h = count ? Math.max(1.5, (Math.log1p(count) / Math.log1p(peak)) * (BASE - TOP)) : 0;
      const bound = 2 ** exp;
      const range = exp === 0 ? '< 1ms' : `${fmtMs(2 ** (exp - 1))} – ${fmtMs(bound)}`;
      const g = svg('g', { class: 'bar' });
      g.append(svg('title', {}, `${range} late: ${count} document${count === 1 ? '' : 's'}`));
      g.append(svg('rect', { x: (i * slot + gap / 2).toFixed(1), y: (BASE - h).toFixed(1),
        width: Math.max(0.5, slot - gap).toFixed(1), height: h.toFixed(1) }));
      if (count && n <= 20) {
        g.append(svg('text', { x: (i * slot + slot / 2).toFixed(1), y: (BASE - h - 3).toFixed(1),
          'text-anchor': 'middle', class: 'value' }, shortCount(count)));
      }
      if (i % labelEvery === 0) {
        g.append(svg('text', { x: (i * slot + slot / 2).toFixed(1), y: BASE + 13,
          'text-anchor': 'middle', class: 'label' }, `<${fmtMs(bound)}`));
      }
      kids.push(g);
    }
    kids.push(svg('line', { x1: 0, y1: BASE, x2: W, y2: BASE, class: 'axis' }));
    els.hist.replaceChildren(...kids);
  }

  function renderMetrics(data) {
    const dps = typeof data.deletesPerSecond === 'number' ? data.deletesPerSecond : 0;
    els.dps.textContent = fmtRate(dps);
    dpsHistory.push(dps);
    if (dpsHistory.length > HISTORY) dpsHistory.shift();
    renderSparkline(dpsHistory);
    els.deleted.textContent = fmtCount(data.deletedDocuments);
    els.passes.textContent = fmtCount(data.passes);
    const l = data.lateness || {};
    els.p50.textContent = l.count ? fmtDuration(l.p50Ms) : '–';
    els.p99.textContent = l.count ? fmtDuration(l.p99Ms) : '–';
    els.max.textContent = l.count ? fmtDuration(l.maxMs) : '–';
    els.lcount.textContent = fmtCount(l.count || 0);
    renderHistogram(l.histogram);
  }

  /* ---------- polling ---------- */

  function setStatus(text, state) {
    els.status.textContent = text;
    els.status.dataset.state = state;
  }

  async function poll() {
    clearTimeout(timer);
    timer = null;
    if (inFlight) {
      pollAgain = true;
      return;
    }
    inFlight = true;
    try {
      const data = await api('GET');
      renderIndexes(Array.isArray(data.indexes) ? data.indexes : []);
      renderMetrics(data);
      setStatus(`Live · updated ${fmtDate(new Date()).slice(11)}`, 'ok');
      if (alertFromPoll) clearError();
    } catch (err) {
      setStatus(`Not updated: ${err.message} (retrying)`, 'error');
      if (err.fromServer) {
        showError('Could not read the TTL indexes:', err);
        alertFromPoll = true;
      }
    } finally {
      inFlight = false;
    }
    if (pollAgain) {
      pollAgain = false;
      poll();
      return;
    }
    timer = setTimeout(poll, document.hidden ? POLL_MS * 4 : POLL_MS);
  }

  document.addEventListener('visibilitychange', () => {
    if (!document.hidden) poll();
  });

  /* ---------- writes ---------- */

  async function changeExpire(tr, input, button) {
    const { db, collection, name } = tr.dataset;
    const value = Number(input.value);
    button.disabled = true;
    try {
      const r = await api('PATCH', { db, collection, name, expireAfterSeconds: value });
      clearError();
      input.dataset.dirty = '';
      input.dataset.current = String(value);
      const from = r.expireAfterSeconds_old;
      const to = r.expireAfterSeconds_new !== undefined ? r.expireAfterSeconds_new : value;
      showNotice(from === undefined || from === to
        ? `${db}.${collection} ${name}: expireAfterSeconds is ${to}.`
        : `${db}.${collection} ${name}: expireAfterSeconds ${from} → ${to}.`);
      poll();
    } catch (err) {
      showError(`Could not change ${db}.${collection} ${name}:`, err);
    } finally {
      button.disabled = false;
    }
  }

  els.create.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const f = els.create.elements;
    const body = {
      db: f.db.value.trim(),
      collection: f.collection.value.trim(),
      key: f.field.value.trim(),
      expireAfterSeconds: Number(f.expireAfterSeconds.value),
    };
    const button = els.create.querySelector('button[type="submit"]');
    button.disabled = true;
    try {
      const r = await api('POST', body);
      clearError();
      showNotice(`Created ${r.name || 'the index'} on ${body.db}.${body.collection}` +
        `${r.note ? ` (${r.note})` : ''}.`);
      f.field.value = '';
      f.expireAfterSeconds.value = '';
      poll();
    } catch (err) {
      showError(`Could not create the index on ${body.db}.${body.collection}:`, err);
    } finally {
      button.disabled = false;
    }
  });

  poll();
})();

// The dashboard's page: renders each snapshot the server sends over one event stream.
// Text from the repository (names, titles, messages) is only ever inserted as text nodes
// (append of a string, textContent): never parsed as HTML. The server has already made
// control characters visible; `shown` does it again for anything that slipped through.
'use strict';
(function () {
  const token = new URLSearchParams(location.search).get('token');
  const withToken = (path) => (token ? path + '?token=' + encodeURIComponent(token) : path);
  const SVG = 'http://www.w3.org/2000/svg';
  const main = document.getElementById('main');
  const live = document.getElementById('live');
  let snap = null;
  let receivedAt = 0;
  let count = 0;

  // Controls (C0, DEL, C1) and bidirectional overrides as visible escapes.
  function shown(v) {
    if (v === null || v === undefined) return '';
    return String(v).replace(/[\u0000-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/g,
      (c) => '\\u{' + c.charCodeAt(0).toString(16) + '}');
  }

  // An element with attributes and children (strings become text nodes).
  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === 'class') e.className = v; else e.setAttribute(k, shown(v));
    }
    for (const c of children) {
      if (c === null || c === undefined || c === false) continue;
      e.append(c instanceof Node ? c : shown(c));
    }
    return e;
  }

  function svg(tag, attrs, text) {
    const e = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
    if (text !== undefined) e.textContent = shown(text);
    return e;
  }

  const known = () => (snap && snap.statuses) || [];
  function statusColour(status) {
    return known().includes(status) ? 'var(--' + status + ')' : 'var(--DEFINED)';
  }
  function chip(status, extra) {
    const c = el('span', { class: 'chip' }, extra === undefined ? status : status + ' ' + extra);
    c.style.background = statusColour(status);
    return c;
  }

  function nowSecs() {
    return snap.now + (Date.now() - receivedAt) / 1000;
  }
  function ago(rfc3339) {
    if (!rfc3339) return '-';
    const t = Date.parse(rfc3339);
    if (isNaN(t)) return shown(rfc3339);
    const d = Math.max(0, Math.floor(nowSecs() - t / 1000));
    if (d < 60) return d + 's ago';
    if (d < 3600) return Math.floor(d / 60) + 'm ago';
    if (d < 86400) return Math.floor(d / 3600) + 'h ago';
    return Math.floor(d / 86400) + 'd ago';
  }
  // "in 42m" for a time to come (a lease's end).
  function until(rfc3339) {
    const t = Date.parse(rfc3339);
    if (isNaN(t)) return 'at ' + shown(rfc3339);
    const d = Math.floor(t / 1000 - nowSecs());
    if (d <= 0) return 'now';
    if (d < 60) return 'in ' + d + 's';
    if (d < 3600) return 'in ' + Math.floor(d / 60) + 'm';
    return 'in ' + Math.floor(d / 3600) + 'h';
  }
  function claimText(c) {
    if (!c) return 'unclaimed';
    const who = c.mine ? 'this machine' : c.actor + '@' + c.host;
    return 'claimed by ' + who + ' on ' + c.remote + ', lease ends ' + until(c.expires);
  }
  const streams = () => (snap && snap.streams) || [];
  const byName = (name) => streams().find((s) => s.row.name === name);
  // A colour per stream, in plan order, spread around the wheel.
  function streamColour(name) {
    const i = streams().findIndex((s) => s.row.name === name);
    return 'hsl(' + ((i * 137.5 + 200) % 360).toFixed(0) + ', 62%, 52%)';
  }

  // ---- views ----------------------------------------------------------------------------------

  function board() {
    const out = [];
    const rows = streams();
    const summary = el('div', { class: 'summary' });
    for (const status of known()) {
      const n = rows.filter((s) => s.row.status === status).length;
      const c = chip(status, n);
      if (n === 0) c.classList.add('zero');
      c.dataset.count = String(n);
      summary.append(c);
    }
    out.push(summary);
    if (rows.length === 0) {
      out.push(el('p', { class: 'muted' }, 'No streams in the plan.'));
      return out;
    }
    const columns = el('div', { class: 'board' });
    const order = known().concat(rows.map((s) => s.row.status).filter((s) => !known().includes(s)));
    for (const status of [...new Set(order)]) {
      const here = rows.filter((s) => s.row.status === status);
      if (here.length === 0) continue;
      const col = el('div', { class: 'column', 'data-column': status }, el('h3', {}, chip(status, here.length)));
      for (const s of here) col.append(card(s));
      columns.append(col);
    }
    out.push(columns);
    return out;
  }

  function card(s) {
    const r = s.row;
    const a = el('a', { class: 'card', href: '#/stream/' + encodeURIComponent(r.name), 'data-stream': r.name, 'data-status': r.status });
    a.style.borderLeftColor = statusColour(r.status);
    a.append(el('div', { class: 'name' }, r.name));
    const pct = r.progress.total ? (100 * r.progress.done) / r.progress.total : 0;
    const bar = el('div', { class: 'bar' }, el('div'));
    bar.firstChild.style.width = pct + '%';
    a.append(bar);
    a.append(el('div', { class: 'line' }, r.progress.done + '/' + r.progress.total + ' stories · queue: ' + s.queue));
    a.append(el('div', { class: 'line' }, claimText(r.claim)));
    a.append(el('div', { class: 'line' }, (r.last_activity ? 'active ' + ago(r.last_activity) : 'no activity yet') + ' · ' + r.iteration + ' commits'));
    if (r.ahead !== null && r.ahead !== undefined) {
      a.append(el('div', { class: 'line' }, '+' + r.ahead + '/-' + r.behind + ' against ' + snap.base_branch + (r.dirty ? ' · uncommitted changes' : '')));
    }
    if (s.commits && s.commits.length) {
      a.append(el('div', { class: 'line mono', 'data-last-commit': '' }, s.commits[0].id.slice(0, 8) + ' ' + s.commits[0].subject));
    }
    if (r.attention) a.append(el('div', { class: 'line attention' }, 'refused (' + r.attention.refusal + '): ' + r.attention.reason));
    return a;
  }

  function facts(pairs) {
    const t = el('table', { class: 'facts' });
    for (const [k, v] of pairs) t.append(el('tr', {}, el('th', {}, k), el('td', {}, v)));
    return t;
  }

  function streamPage(name) {
    const s = byName(name);
    if (!s) return [el('p', {}, 'No stream ', el('strong', {}, name), ' in the plan.')];
    const r = s.row;
    const out = [el('h2', {}, r.name + ' ', chip(r.status))];
    out.push(facts([
      ['branch', r.branch],
      ['progress', r.progress.done + '/' + r.progress.total + ' stories'],
      ['queue', s.queue],
      ['claim', claimText(r.claim)],
      ['last activity', r.last_activity ? ago(r.last_activity) + ' (' + r.last_activity + ')' : '-'],
      ['commits recorded', String(r.iteration)],
      ['ahead / behind', r.ahead === null || r.ahead === undefined ? '-' : '+' + r.ahead + ' / -' + r.behind],
      ['worktree', r.worktree ? r.worktree + (r.dirty ? ' (uncommitted changes)' : '') : '-'],
      ['depends on', s.depends_on.length ? s.depends_on.join(', ') : '-'],
      ['owns', s.paths.length ? s.paths.join(', ') : '-'],
    ]));
    if (r.attention) {
      out.push(el('h2', {}, 'Needs attention'));
      out.push(el('div', { class: 'box warn' }, el('div', {}, r.attention.reason),
        r.attention.hint ? el('div', { class: 'muted' }, 'fix: ' + r.attention.hint) : null,
        el('div', { class: 'mono' }, r.attention.command)));
    }
    out.push(el('h2', {}, 'Checkpoint'));
    out.push(s.checkpoint
      ? el('div', { class: 'box' }, el('div', {}, s.checkpoint.message), el('div', { class: 'muted' }, s.checkpoint.at))
      : el('p', { class: 'muted' }, 'none recorded'));
    out.push(el('h2', {}, 'Stories'));
    const ul = el('ul', { class: 'stories' });
    for (const st of s.stories) {
      ul.append(el('li', { 'data-story': st.id }, el('span', { class: st.done ? 'done' : 'open' }, st.done ? '✓ ' : '○ '),
        el('strong', {}, st.id), st.title === undefined ? '' : ': ', el('span', { class: 'story-title' }, st.title)));
    }
    out.push(s.stories.length ? ul : el('p', { class: 'muted' }, 'no stories'));
    out.push(el('h2', {}, 'Commits the base lacks'));
    if (s.commits.length) {
      const t = el('table', {}, el('tr', {}, el('th', {}, 'commit'), el('th', {}, 'subject'), el('th', {}, 'time')));
      for (const c of s.commits) t.append(el('tr', {}, el('td', { class: 'mono' }, c.id.slice(0, 10)), el('td', {}, c.subject), el('td', {}, c.time || '')));
      out.push(t);
      if (s.commits_more) out.push(el('p', { class: 'muted' }, 'only the newest ' + s.commits.length + ' shown'));
    } else {
      out.push(el('p', { class: 'muted' }, 'none'));
    }
    out.push(el('h2', {}, 'Op history (newest first)'));
    if (s.ops.length) {
      const t = el('table', {}, el('tr', {}, el('th', {}, 'time'), el('th', {}, 'log'), el('th', {}, 'op'), el('th', {}, 'actor'), el('th', {}, 'data')));
      for (const o of s.ops) {
        t.append(el('tr', {}, el('td', {}, o.at), el('td', {}, o.log), el('td', {}, o.kind), el('td', {}, o.actor),
          el('td', { class: 'mono' }, o.data && Object.keys(o.data).length ? JSON.stringify(o.data) : '')));
      }
      out.push(t);
    } else {
      out.push(el('p', { class: 'muted' }, 'no ops recorded'));
    }
    return out;
  }

  // Streams in columns by depth (longest chain of depends_on below them), edges to dependents.
  function graph() {
    const rows = streams();
    if (!rows.length) return [el('p', { class: 'muted' }, 'No streams in the plan.')];
    const depth = {};
    const visiting = {};
    const depthOf = (name) => {
      if (depth[name] !== undefined) return depth[name];
      if (visiting[name]) return 0;
      visiting[name] = true;
      const s = byName(name);
      const d = s ? Math.max(-1, ...s.depends_on.map((x) => (byName(x) ? depthOf(x) : -1))) + 1 : 0;
      depth[name] = d;
      return d;
    };
    rows.forEach((s) => depthOf(s.row.name));
    const cols = [];
    rows.forEach((s) => (cols[depth[s.row.name]] = cols[depth[s.row.name]] || []).push(s.row.name));
    const W = 170, H = 46, GX = 70, GY = 22;
    const pos = {};
    cols.forEach((names, c) => names.forEach((n, i) => (pos[n] = { x: 20 + c * (W + GX), y: 20 + i * (H + GY) })));
    const width = 40 + cols.length * (W + GX);
    const height = 40 + Math.max(...cols.map((c) => c.length)) * (H + GY);
    const root = svg('svg', { width, height, viewBox: '0 0 ' + width + ' ' + height, id: 'graph' });
    const defs = svg('defs');
    const marker = svg('marker', { id: 'arrow', viewBox: '0 0 10 10', refX: 10, refY: 5, markerWidth: 8, markerHeight: 8, orient: 'auto-start-reverse' });
    marker.append(svg('path', { d: 'M 0 0 L 10 5 L 0 10 z', fill: '#6b7280' }));
    defs.append(marker);
    root.append(defs);
    for (const s of rows) {
      for (const d of s.depends_on) {
        if (!pos[d]) continue;
        const a = pos[d], b = pos[s.row.name];
        root.append(svg('line', { x1: a.x + W, y1: a.y + H / 2, x2: b.x, y2: b.y + H / 2, stroke: '#6b7280', 'stroke-width': 1.5, 'marker-end': 'url(#arrow)' }));
      }
    }
    for (const s of rows) {
      const p = pos[s.row.name];
      const g = svg('g', { 'data-node': s.row.name });
      const link = svg('a', { href: '#/stream/' + encodeURIComponent(s.row.name) });
      const rect = svg('rect', { x: p.x, y: p.y, width: W, height: H, rx: 6, fill: '#fff', stroke: '#d9dde3' });
      const band = svg('rect', { x: p.x, y: p.y, width: 5, height: H, rx: 2 });
      band.style.fill = statusColour(s.row.status);
      link.append(rect, band, svg('text', { x: p.x + 14, y: p.y + 19, 'font-weight': 600 }, s.row.name),
        svg('text', { x: p.x + 14, y: p.y + 36, fill: '#6b7280' }, s.row.status + ' · ' + s.row.progress.done + '/' + s.row.progress.total));
      g.append(link);
      root.append(g);
    }
    return [el('p', { class: 'muted' }, 'An arrow runs from a stream to the streams that depend on it (depends_on).'), root];
  }

  function ownership() {
    const o = snap.ownership;
    const out = [];
    const legend = el('div', { class: 'legend' });
    const colourOf = (f) => (f.kind === 'stream' ? streamColour(f.owner) : f.kind === 'shared_read' ? '#94a3b8' : f.kind === 'prd' ? '#1d2330' : '#e5e7eb');
    const sw = (colour, label) => {
      const s = el('span', { class: 'swatch' });
      s.style.background = colour;
      return el('span', {}, s, label);
    };
    for (const s of streams()) {
      const n = o.files.filter((f) => f.kind === 'stream' && f.owner === s.row.name).length;
      legend.append(sw(streamColour(s.row.name), s.row.name + ' (' + n + ')'));
    }
    for (const [kind, label] of [['shared_read', 'shared_read'], ['prd', 'the PRD'], ['unowned', 'no stream']]) {
      legend.append(sw(colourOf({ kind }), label + ' (' + o.files.filter((f) => f.kind === kind).length + ')'));
    }
    out.push(el('p', { class: 'muted' }, 'The tree of ' + snap.base_branch + ' (' + (o.commit || '').slice(0, 10) + '), each file coloured by the stream that owns it.'));
    if (o.shown < o.total) out.push(el('p', { class: 'muted', 'data-capped': '' }, 'Showing the first ' + o.shown + ' of ' + o.total + ' files.'));
    out.push(legend);
    const dirs = new Map();
    for (const f of o.files) {
      const i = f.path.lastIndexOf('/');
      const dir = i < 0 ? '.' : f.path.slice(0, i).replace(/^"/, '');
      if (!dirs.has(dir)) dirs.set(dir, []);
      dirs.get(dir).push(f);
    }
    const map = el('div', { id: 'ownership' });
    // A small tree shows each file by name; a large one a square per file (its name on hover).
    const named = o.files.length <= 300;
    for (const [dir, files] of dirs) {
      const cells = el('div', { class: 'cells' });
      for (const f of files) {
        const title = f.path + ' — ' + (f.kind === 'stream' ? f.owner : f.kind);
        const base = f.path.slice(f.path.lastIndexOf('/') + 1).replace(/"$/, '');
        const c = el('div', { class: named ? 'file mono' : 'cell', title, 'data-path': f.path, 'data-kind': f.kind }, named ? base : null);
        if (named) c.style.borderLeftColor = colourOf(f); else c.style.background = colourOf(f);
        cells.append(c);
      }
      map.append(el('div', { class: 'dir' }, el('div', { class: 'label mono', title: dir }, dir === '.' ? '(top)' : dir + '/'), cells));
    }
    out.push(map);
    return out;
  }

  // A row per stream, a tick per recorded commit, on one time axis.
  function timeline() {
    const rows = streams();
    const all = rows.flatMap((s) => s.activity);
    if (!all.length) return [el('p', { class: 'muted' }, 'No commits recorded yet.')];
    const lo = Math.min(...all), hi = Math.max(...all, lo + 1);
    const L = 160, W = 760, RH = 26;
    const root = svg('svg', { width: L + W + 40, height: rows.length * RH + 50, id: 'timeline' });
    const x = (t) => L + ((t - lo) / (hi - lo)) * W;
    rows.forEach((s, i) => {
      const y = 20 + i * RH;
      root.append(svg('text', { x: 0, y: y + 4 }, s.row.name));
      root.append(svg('line', { x1: L, y1: y, x2: L + W, y2: y, stroke: '#e5e7eb' }));
      for (const t of s.activity) {
        const c = svg('circle', { cx: x(t).toFixed(1), cy: y, r: 4, 'fill-opacity': 0.8 });
        c.style.fill = streamColour(s.row.name);
        root.append(c);
      }
      root.append(svg('text', { x: L + W + 8, y: y + 4, fill: '#6b7280' }, String(s.activity.length)));
    });
    const iso = (t) => new Date(t * 1000).toISOString().replace('.000Z', 'Z');
    const y = rows.length * RH + 36;
    root.append(svg('text', { x: L, y }, iso(lo)), svg('text', { x: L + W, y, 'text-anchor': 'end' }, iso(hi)));
    return [el('p', { class: 'muted' }, 'Commits recorded per stream over time (the newest 500 of each).'), root];
  }

  // ---- rendering ------------------------------------------------------------------------------

  function route() {
    const h = location.hash.replace(/^#\/?/, '');
    if (h.startsWith('stream/')) return { view: 'stream', name: decodeURIComponent(h.slice(7)) };
    return { view: ['graph', 'ownership', 'timeline'].includes(h) ? h : 'board' };
  }

  function render() {
    const r = route();
    for (const a of document.querySelectorAll('nav a')) a.classList.toggle('on', a.dataset.view === r.view);
    if (!snap) return;
    document.getElementById('repo').textContent = shown((snap.repo || '') + (snap.base_branch ? ' · ' + snap.base_branch : '') + (snap.host ? ' · ' + snap.host : ''));
    let nodes;
    if (snap.error) {
      nodes = [el('p', { class: 'error' }, snap.error)];
    } else if (r.view === 'stream') {
      nodes = streamPage(r.name);
    } else if (r.view === 'graph') {
      nodes = graph();
    } else if (r.view === 'ownership') {
      nodes = ownership();
    } else if (r.view === 'timeline') {
      nodes = timeline();
    } else {
      nodes = board();
    }
    if (snap.spend) nodes.push(el('h2', {}, 'Spend'), el('pre', { class: 'box mono' }, JSON.stringify(snap.spend, null, 2)));
    if (snap.review) nodes.push(el('h2', {}, 'Review'), el('pre', { class: 'box mono' }, JSON.stringify(snap.review, null, 2)));
    const pull = snap.server && snap.server.pull;
    if (pull && pull.error) nodes.push(el('p', { class: 'error' }, 'pull: ' + pull.error));
    main.replaceChildren(...nodes);
  }

  function connect() {
    const events = new EventSource(withToken('/events'));
    events.addEventListener('snapshot', (e) => {
      snap = JSON.parse(e.data);
      receivedAt = Date.now();
      count += 1;
      document.body.dataset.snapshots = String(count);
      live.className = 'live ok';
      live.textContent = 'live · ' + shown(snap.generated_at || '');
      render();
    });
    events.onerror = () => {
      live.className = 'live down';
      live.textContent = 'reconnecting…';
    };
  }

  window.addEventListener('hashchange', render);
  // Ages move with the clock: redrawn now and then, from the last snapshot.
  setInterval(() => { if (route().view === 'board' || route().view === 'stream') render(); }, 10000);
  for (const a of document.querySelectorAll('nav a')) a.setAttribute('href', withToken('') + a.getAttribute('href'));
  connect();
})();

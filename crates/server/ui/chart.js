// Line charts drawn by hand on a <canvas>: one or more series over time, the latest value in the title. The canvas
// carries the number of points drawn in `data-points` (the last value of each series in `data-last`, the
// largest value in `data-max`), which the browser
// tests read: they assert on data, not on pixels.
'use strict';

const COLORS = ['#d6341f', '#1f5fbf', '#2a8a3e', '#a35fbf'];

class LineChart {
  constructor(title, unit, seriesNames) {
    this.title = title;
    this.unit = unit || (v => number(v, 1));
    this.names = seriesNames || [title];
    this.canvas = el('canvas', { 'data-points': '0', 'data-chart': title });
    this.heading = el('h3', {}, title);
    this.node = el('div', { class: 'chart' }, this.heading, this.canvas);
    this.times = [];
    this.series = this.names.map(() => []);
  }

  // Replaces the data: `times` in ms, `columns` one array per series (null for a missing sample).
  set(times, columns) {
    this.times = times.slice();
    this.series = columns.map(c => c.slice());
    this.draw();
  }

  // Appends one sample per series, keeping at most `keep` points.
  push(time, values, keep) {
    this.times.push(time);
    values.forEach((v, i) => this.series[i].push(v));
    const extra = this.times.length - (keep || 60);
    if (extra > 0) {
      this.times.splice(0, extra);
      this.series.forEach(s => s.splice(0, extra));
    }
    this.draw();
  }

  draw() {
    const c = this.canvas;
    const ratio = window.devicePixelRatio || 1;
    const w = Math.max(c.clientWidth, 200), h = Math.max(c.clientHeight, 100);
    c.width = w * ratio;
    c.height = h * ratio;
    const g = c.getContext('2d');
    g.scale(ratio, ratio);
    g.clearRect(0, 0, w, h);
    const points = this.series.reduce((n, s) => n + s.filter(v => v !== null && v !== undefined).length, 0);
    c.setAttribute('data-points', String(points));
    const last = this.series.map(s => [...s].reverse().find(v => v !== null && v !== undefined));
    c.setAttribute('data-last', last.map(v => v === undefined ? '' : String(v)).join(','));
    this.heading.textContent = this.title + (last[0] === undefined ? '' : ': ' +
      this.names.map((n, i) => (this.names.length > 1 ? n + ' ' : '') + (last[i] === undefined ? '-' : this.unit(last[i]))).join(' · '));
    const all = this.series.flat().filter(v => v !== null && v !== undefined);
    c.setAttribute('data-max', all.length ? String(Math.max(...all)) : '');
    const max = Math.max(1e-9, ...all) * 1.1;
    const pad = { l: 48, r: 6, t: 6, b: 16 };
    g.strokeStyle = '#d8dee6';
    g.fillStyle = '#5f6b7a';
    g.font = '10px system-ui, sans-serif';
    g.lineWidth = 1;
    for (let i = 0; i <= 2; i++) {
      const y = pad.t + (h - pad.t - pad.b) * i / 2;
      g.beginPath(); g.moveTo(pad.l, y); g.lineTo(w - pad.r, y); g.stroke();
      g.fillText(this.unit(max * (1 - i / 2)), 2, y + 3);
    }
    const n = this.times.length;
    if (n < 1) return;
    const x = i => pad.l + (w - pad.l - pad.r) * (n === 1 ? 1 : i / (n - 1));
    const y = v => pad.t + (h - pad.t - pad.b) * (1 - v / max);
    this.series.forEach((s, k) => {
      g.strokeStyle = COLORS[k % COLORS.length];
      g.lineWidth = 1.5;
      g.beginPath();
      let pen = false;
      s.forEach((v, i) => {
        if (v === null || v === undefined) { pen = false; return; }
        if (pen) g.lineTo(x(i), y(v)); else g.moveTo(x(i), y(v));
        pen = true;
        if (n === 1 || (i > 0 && (s[i - 1] === null || s[i - 1] === undefined))) g.fillRect(x(i) - 1, y(v) - 1, 3, 3);
      });
      g.stroke();
    });
  }
}

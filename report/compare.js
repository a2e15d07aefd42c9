const higherIsBetter = JSON.parse(document.getElementById('directions').textContent);
const origin = (() => { try { const u = new URL(location.href.replace(/^blob:/, ''));
  return /^https?:$/.test(u.protocol) ? u.origin : null; } catch (e) { return null; } })();
if (origin) document.querySelectorAll('a.trace').forEach(a => {
  a.href = origin + a.getAttribute('data-route'); });
// A trace opens in a new tab. MLflow's artifact viewer is a sandboxed frame that lets no
// link leave it (no popups, no top navigation; following one there blanks the pane), so
// there the link shows its address to open in a new tab instead, and the page stays.
function showAddress(a) {
  let note = a.parentNode.querySelector('.trace-note');
  if (!note) { note = document.createElement('div'); note.className = 'trace-note';
    a.parentNode.appendChild(note); }
  note.textContent = 'This viewer cannot open links: open this address in a new tab ';
  const box = document.createElement('input'); box.readOnly = true; box.value = a.href;
  note.appendChild(box); box.focus(); box.select();
}
document.querySelectorAll('a.trace').forEach(a => a.addEventListener('click', e => {
  e.preventDefault();
  let opened = null;
  try { opened = window.open(a.href, '_blank'); } catch (err) { opened = null; }
  if (opened) { opened.opener = null; } else { showAddress(a); }
}));
function score(tr, run, metric) {
  const v = JSON.parse(tr.getAttribute('data-scores'))[run]; return v ? v[metric] : null; }
function sortRows() {
  const a = +document.getElementById('runA').value, b = +document.getElementById('runB').value;
  const metric = document.getElementById('metric').value;
  const body = document.getElementById('rows');
  const rows = [...body.querySelectorAll('tr')];
  rows.forEach(tr => { const x = score(tr, a, metric), y = score(tr, b, metric);
    const d = (x == null || y == null) ? null : x - y;
    tr.dataset.diff = d == null ? '' : d;
    tr.querySelector('.diff').textContent = d == null ? 'n/a' : (d > 0 ? '+' : '') + d.toFixed(3); });
  // the first run's advantage first, by the metric's direction (report.policy)
  const sign = higherIsBetter[metric] === false ? -1 : 1;
  rows.sort((r, s) => { const x = r.dataset.diff, y = s.dataset.diff;
    if (x === '') return y === '' ? 0 : 1; if (y === '') return -1; return sign * (+y - +x); });
  rows.forEach(tr => body.appendChild(tr));
}
['runA', 'runB', 'metric'].forEach(id => document.getElementById(id).onchange = sortRows);
sortRows();
// filter by a document feature's value (or numeric bin)
const featureValues = JSON.parse(document.getElementById('features').textContent);
const featureBox = document.getElementById('feature'), valueBox = document.getElementById('featureValue');
function filterRows() {
  const f = featureBox.value, v = valueBox.value; let shown = 0;
  document.querySelectorAll('#rows tr').forEach(tr => {
    const keep = !f || JSON.parse(tr.getAttribute('data-features'))[f] === v;
    tr.style.display = keep ? '' : 'none'; shown += keep; });
  document.getElementById('shown').textContent = shown;
}
featureBox.onchange = () => {
  valueBox.innerHTML = '';
  (featureValues[featureBox.value] || []).forEach(v => {
    const o = document.createElement('option'); o.textContent = v; valueBox.appendChild(o); });
  filterRows(); };
valueBox.onchange = filterRows;

// The analyst's page: polls /answers.json (the replica's query service, through the demo server) every
// second and draws, per item, the debiased count of each rating as a bar with its 95 % interval (SVG).
const chart = document.getElementById("chart");
const summary = document.getElementById("summary");
const SVG = "http://www.w3.org/2000/svg";
const W = 340;
const H = 170;
const PAD = { left: 34, right: 8, top: 10, bottom: 24 };

function el(name, attributes = {}, text) {
  const node = document.createElementNS(SVG, name);
  for (const [key, value] of Object.entries(attributes)) node.setAttribute(key, String(value));
  if (text !== undefined) node.textContent = text;
  return node;
}

function panel(item) {
  const box = document.createElement("section");
  box.className = "panel";
  box.dataset.item = item.item;
  box.dataset.responses = String(item.responses);
  box.innerHTML = `<h2></h2><div class="count"></div>`;
  box.querySelector("h2").textContent = item.item;
  box.querySelector(".count").textContent = `${item.responses} rating${item.responses === 1 ? "" : "s"}`;
  const lows = item.ratings.map((r) => r.low);
  const highs = item.ratings.map((r) => r.high);
  const top = Math.max(1, ...highs);
  const bottom = Math.min(0, ...lows);
  const y = (v) => PAD.top + (H - PAD.top - PAD.bottom) * (top - v) / (top - bottom);
  const step = (W - PAD.left - PAD.right) / item.ratings.length;
  const svg = el("svg", { viewBox: `0 0 ${W} ${H}`, width: W, height: H, role: "img",
    "aria-label": `estimated counts of each rating of ${item.item}` });
  svg.append(el("line", { class: "axis", x1: PAD.left, x2: W - PAD.right, y1: y(0), y2: y(0) }));
  svg.append(el("text", { x: PAD.left - 4, y: y(top) + 4, "text-anchor": "end" }, top.toFixed(0)));
  svg.append(el("text", { x: PAD.left - 4, y: y(0) + 4, "text-anchor": "end" }, "0"));
  item.ratings.forEach((r, i) => {
    const x = PAD.left + i * step;
    const bar = el("rect", { class: "bar", x: x + step * 0.2, width: step * 0.6, y: Math.min(y(r.estimate), y(0)),
      height: Math.abs(y(0) - y(r.estimate)) });
    Object.assign(bar.dataset, { rating: String(r.rating), estimate: String(r.estimate), low: String(r.low),
      high: String(r.high) });
    svg.append(bar);
    const cx = x + step / 2;
    svg.append(el("line", { class: "interval", x1: cx, x2: cx, y1: y(r.low), y2: y(r.high) }));
    svg.append(el("line", { class: "interval", x1: cx - 5, x2: cx + 5, y1: y(r.low), y2: y(r.low) }));
    svg.append(el("line", { class: "interval", x1: cx - 5, x2: cx + 5, y1: y(r.high), y2: y(r.high) }));
    svg.append(el("text", { x: cx, y: H - 8, "text-anchor": "middle" }, "★".repeat(r.rating)));
  });
  box.append(svg);
  return box;
}

async function refresh() {
  try {
    const answers = await (await fetch("/answers.json")).json();
    if (answers.n > 0) {
      chart.replaceChildren(...answers.items.map(panel));
      summary.textContent = `${answers.n} randomized ratings, ε = ${Number(answers.epsilon.toPrecision(4))} each; `
        + `${Math.round(answers.level * 100)} % intervals; updated ${new Date().toLocaleTimeString()}`;
    }
    summary.dataset.n = String(answers.n);
  } catch (err) {
    summary.textContent = `The answers could not be read: ${err.message}`;
  }
  setTimeout(refresh, 1000);
}
refresh();

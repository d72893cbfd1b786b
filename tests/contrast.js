// WCAG 2.1 contrast of every visible text on the page (HTML or SVG), measured in the browser:
// the text's colour over its effective background (for HTML, the first opaque background up the
// ancestors; for SVG text, the topmost filled shape under the text's centre). Returns one record per
// text: {text, fg, bg, ratio, px, bold}.
() => {
  function parse(c) {
    const m = /rgba?\(([^)]+)\)/.exec(c || "");
    if (!m) return null;
    const p = m[1].split(/[\s,\/]+/).filter(Boolean).map(Number);
    return {r: p[0], g: p[1], b: p[2], a: p.length > 3 ? p[3] : 1};
  }
  function over(fg, bg) {
    const a = fg.a;
    return {r: fg.r * a + bg.r * (1 - a), g: fg.g * a + bg.g * (1 - a), b: fg.b * a + bg.b * (1 - a), a: 1};
  }
  function lum(c) {
    const f = v => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); };
    return 0.2126 * f(c.r) + 0.7152 * f(c.g) + 0.0722 * f(c.b);
  }
  function ratio(a, b) {
    const x = lum(a), y = lum(b);
    return (Math.max(x, y) + 0.05) / (Math.min(x, y) + 0.05);
  }
  function hex(c) { return "#" + [c.r, c.g, c.b].map(v => Math.round(v).toString(16).padStart(2, "0")).join(""); }
  function opacity(el) {
    let o = 1;
    for (let e = el; e && e.nodeType === 1; e = e.parentElement) o *= parseFloat(getComputedStyle(e).opacity || "1");
    return o;
  }
  const out = [];
  const svg = document.documentElement.tagName.toLowerCase() === "svg";
  if (svg) {
    const shapes = Array.from(document.querySelectorAll("rect, path, circle")).filter(s => {
      const f = parse(getComputedStyle(s).fill);
      return f && f.a > 0;
    });
    const page = {r: 255, g: 255, b: 255, a: 1};
    for (const t of document.querySelectorAll("text")) {
      const text = t.textContent.replace(/\u00a0/g, " ").trim();
      const box = t.getBoundingClientRect();
      if (!text || box.width === 0) continue;
      const x = box.left + box.width / 2, y = box.top + box.height / 2;
      let bg = page;
      for (const s of shapes) {
        const r = s.getBoundingClientRect();
        if (x >= r.left && x <= r.right && y >= r.top && y <= r.bottom) bg = over(parse(getComputedStyle(s).fill), bg);
      }
      const style = getComputedStyle(t);
      const fill = parse(style.fill);
      fill.a *= opacity(t) * parseFloat(style.fillOpacity || "1");
      const fg = over(fill, bg);
      const px = parseFloat(style.fontSize) * (t.getScreenCTM() ? t.getScreenCTM().a : 1);
      out.push({text, fg: hex(fg), bg: hex(bg), ratio: ratio(fg, bg), px, bold: parseInt(style.fontWeight, 10) >= 700});
    }
    return out;
  }
  function background(el) {
    const layers = [];
    for (let e = el; e && e.nodeType === 1; e = e.parentElement) {
      const c = parse(getComputedStyle(e).backgroundColor);
      if (c && c.a > 0) { layers.push(c); if (c.a >= 1) break; }
    }
    let bg = {r: 255, g: 255, b: 255, a: 1};
    for (let i = layers.length - 1; i >= 0; i--) bg = over(layers[i], bg);
    return bg;
  }
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  const seen = new Set();
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    const el = n.parentElement;
    const text = n.textContent.replace(/\u00a0/g, " ").trim();
    if (!text || !el || seen.has(el) || !el.getClientRects().length) continue;
    const style = getComputedStyle(el);
    if (style.visibility === "hidden" || el.closest("script, style")) continue;
    seen.add(el);
    const bg = background(el);
    const fg = over(Object.assign(parse(style.color), {}), bg);
    const zoom = parseFloat(getComputedStyle(document.body).zoom || "1");
    out.push({text: el.textContent.trim().slice(0, 60), fg: hex(fg), bg: hex(bg), ratio: ratio(fg, bg),
              px: parseFloat(style.fontSize) * zoom, bold: parseInt(style.fontWeight, 10) >= 700});
  }
  return out;
}

// Terminal output as text with colours: SGR sequences (ESC [ ... m)
// become classes on spans; every other escape sequence is dropped. The
// text itself is never markup: the page renders it as text nodes.

export interface Segment {
  text: string;
  cls: string;
}

// CSI (ESC [ params final), OSC (ESC ] ... BEL or ESC \), and two-byte escapes.
const escape = /\x1b\[([0-9;?]*)([@-~])|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-Z\\-_]?/g;

/** segments splits s into runs of one style. */
export function segments(s: string): Segment[] {
  const out: Segment[] = [];
  let fg = "";
  let bold = false;
  let last = 0;
  const push = (text: string) => {
    if (!text) return;
    const cls = [fg, bold ? "a-b" : ""].filter(Boolean).join(" ");
    const prev = out[out.length - 1];
    if (prev && prev.cls === cls) prev.text += text;
    else out.push({ text, cls });
  };
  for (const m of s.matchAll(escape)) {
    push(s.slice(last, m.index));
    last = (m.index ?? 0) + m[0].length;
    if (m[2] !== "m") continue;
    const codes = (m[1] || "0").split(";").map((c) => parseInt(c || "0", 10));
    for (let i = 0; i < codes.length; i++) {
      const c = codes[i];
      if (c === 0) {
        fg = "";
        bold = false;
      } else if (c === 1) bold = true;
      else if (c === 22) bold = false;
      else if (c === 39) fg = "";
      else if (c >= 30 && c <= 37) fg = "a-" + (c - 30);
      else if (c >= 90 && c <= 97) fg = "a-" + (c - 90 + 8);
      else if (c === 38 || c === 48) i += codes[i + 1] === 5 ? 2 : 4; // 256-colour and RGB: skipped
    }
  }
  push(s.slice(last));
  // Other control characters (not tab or newline) show as nothing.
  for (const seg of out) seg.text = seg.text.replace(/[\x00-\x08\x0b-\x1f\x7f]/g, "");
  return out.filter((seg) => seg.text);
}

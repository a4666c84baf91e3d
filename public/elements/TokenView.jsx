// Tokens in the teaching view: each token a box whose boundary shows; a space shows as ␣, a line break as ↵.
// A reply's tokens are coloured from red (the model thought it unlikely) to green (likely), and a click opens the
// likeliest tokens at that place; a prompt's tokens show their ids on hover, the template's special tokens marked.
// Token text is data: React renders it as text, never as HTML.
import { useState } from "react";

const visible = (text) => text.replace(/ /g, "␣").replace(/\n/g, "↵\n");
const percent = (prob) => `${(100 * prob).toFixed(1)} %`;

export default function TokenView() {
  const [open, setOpen] = useState(null);
  const scored = props.tokens.length > 0 && props.tokens[0].prob !== undefined;
  return (
    <div data-token-view="" className="font-mono text-sm leading-7 whitespace-pre-wrap">
      <div className="text-xs text-muted-foreground">
        {props.title} · {props.tokens.length}{scored ? " · 颜色 = 模型给的概率 colour = the model's probability" : ""}
      </div>
      {props.tokens.map((token, index) => (
        <span key={index} data-token-id={token.id} data-prob={scored ? token.prob : undefined}
              data-special={token.special ? "" : undefined}
              title={scored ? `#${token.id} · ${percent(token.prob)}` : `#${token.id}`}
              onClick={() => scored && setOpen(open === index ? null : index)}
              className={`relative rounded-sm border px-px ${token.special ? "border-dashed border-primary font-bold"
                                                                         : "border-muted-foreground/40"} ${scored ? "cursor-pointer" : ""}`}
              style={scored ? { background: `hsla(${Math.round(120 * token.prob)}, 75%, 45%, 0.35)` } : {}}>
          {visible(token.text)}
          {open === index && (
            <span data-alternatives="" className="rounded-md border bg-background p-2 shadow-md"
                  style={{ position: "absolute", left: 0, top: "1.75rem", zIndex: 50, width: "max-content", whiteSpace: "pre" }}>
              {token.top.map((alternative) => (
                <span key={alternative.id} className="block" data-alternative-id={alternative.id} data-prob={alternative.prob}>
                  {alternative.id === token.id ? "▸ " : "  "}{visible(alternative.text)}  {percent(alternative.prob)}
                </span>
              ))}
            </span>
          )}
        </span>
      ))}
    </div>
  );
}

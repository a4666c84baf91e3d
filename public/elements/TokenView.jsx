// Tokens in the teaching view: each token a box whose boundary shows; a space shows as ␣, a line break as ↵.
// A reply's tokens are coloured from red to green by the probability the sampling gave them (data-prob; the
// model's own in data-model-prob), and a click opens the likeliest tokens at that place with two bars each: the
// model's probability, and the sampling's (temperature, top-k, top-p) that the reply was drawn from. A prompt's
// tokens show their ids on hover, the template's special tokens marked, and a button asks for their probabilities
// (one prefill: props.action). Each alternative of a reply's token has a button (data-force-token, its id) that
// branches: the reply again up to that place, that token in it, the model's continuation below (props.force); a
// branch's view carries data-branch-from (the place). With props.ids (the Tokenize command) each token's id shows under it. Token text is
// data: React renders it as text, never as HTML.
import { useState } from "react";

const colour = (prob) => (prob === undefined ? {} : { background: `hsla(${Math.round(120 * prob)}, 75%, 45%, 0.35)` });
const visible = (text) => text.replace(/ /g, "␣").replace(/\n/g, "↵\n");
const percent = (prob) => `${(100 * prob).toFixed(1)} %`;
const bar = (prob, colour) => (
  <span style={{ display: "inline-block", width: "6rem", height: "0.6rem", background: "rgba(128,128,128,.2)", marginRight: 4 }}>
    <span style={{ display: "block", width: `${100 * prob}%`, height: "100%", background: colour }} />
  </span>
);

export default function TokenView() {
  const [open, setOpen] = useState(null);
  const scored = props.tokens.length > 0 && props.tokens[0].prob !== undefined;
  return (
    <div data-token-view="" data-branch-from={props.branch_from ?? undefined}
         className="font-mono text-sm leading-7 whitespace-pre-wrap">
      <div className="text-xs text-muted-foreground">
        {props.title} · {props.tokens.length}
        {scored ? ` · 颜色 = 采样时的概率 colour = probability under the sampling used (${props.sampling})` : ""}
        {props.action && (
          <button data-weigh-prompt="" className="ml-2 rounded border px-1"
                  onClick={() => callAction({ name: props.action, payload: { element: props.element } })}>
            显示概率 Show the probabilities (one prefill)
          </button>
        )}
      </div>
      {props.tokens.map((token, index) => (
        <span key={index} data-token-id={token.id} data-prob={scored ? token.prob : undefined}
              data-exact={scored ? String(token.exact) : undefined}
              data-model-prob={token.model_prob} data-special={token.special ? "" : undefined}
              title={`#${token.id}` + (scored ? ` · ${percent(token.prob)}` : "")
                     + (token.model_prob === undefined ? "" : ` (model ${percent(token.model_prob)})`)}
              onClick={() => scored && setOpen(open === index ? null : index)}
              className={`relative rounded-sm border px-px ${token.special ? "border-dashed border-primary font-bold"
                                                                         : "border-muted-foreground/40"} ${scored ? "cursor-pointer" : ""}`}
              style={colour(scored ? token.prob : token.model_prob)}>
          {visible(token.text)}
          {props.ids && <sub className="ml-px text-[0.6rem] text-muted-foreground">{token.id}</sub>}
          {open === index && (
            <span data-alternatives="" className="rounded-md border bg-background p-2 shadow-md"
                  style={{ position: "absolute", left: 0, top: "1.75rem", zIndex: 50, width: "max-content", whiteSpace: "pre" }}>
              <span className="block text-xs text-muted-foreground">
                模型 model ▮ · 采样 sampling ▮{token.exact ? "" : " ≈ (approximate: top-k off, tied past the alternatives returned, or a repetition penalty)"}
              </span>
              {token.top.map((alternative) => (
                <span key={alternative.id} className="block" data-alternative-id={alternative.id}
                      data-prob={alternative.prob} data-model-prob={alternative.model_prob}>
                  {props.force && (
                    <button data-force-token={alternative.id} className="mr-1 rounded border px-1 text-xs"
                            title="从这里改用这个词元继续 Continue from here with this token"
                            onClick={(event) => {
                              event.stopPropagation();
                              setOpen(null);
                              callAction({ name: props.force, payload: { element: props.element, index, token: alternative.id } });
                            }}>
                      选
                    </button>
                  )}
                  {alternative.id === token.id ? "▸ " : "  "}{visible(alternative.text).padEnd(8)} {bar(alternative.model_prob, "rgba(128,128,128,.8)")}
                  {percent(alternative.model_prob).padStart(7)} {bar(alternative.prob, "hsl(140, 60%, 45%)")}{percent(alternative.prob).padStart(7)}
                </span>
              ))}
            </span>
          )}
        </span>
      ))}
    </div>
  );
}

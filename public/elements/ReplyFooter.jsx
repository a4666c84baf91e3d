// One line under an assistant reply: tokens generated, decode speed, time to first token (measured); with Compare
// on, a line above it with the sampling the reply was drawn with (data-compare-label), shown while the reply streams.
export default function ReplyFooter() {
  return (
    <div className="text-xs text-muted-foreground font-mono" data-stat="reply_footer">
      {props.label && <div data-compare-label="" className="font-sans font-semibold text-foreground">⚖️ {props.label}</div>}
      {(!props.label || props.generated_tokens > 0) &&
        `${props.generated_tokens} tokens · ${props.tokens_per_s ?? "–"} tokens/s · 首字 first token ${props.ttft_s ?? "–"} s`}
    </div>
  );
}

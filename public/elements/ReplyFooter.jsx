// One line under an assistant reply: tokens generated, decode speed, time to first token (measured).
export default function ReplyFooter() {
  return (
    <div className="text-xs text-muted-foreground font-mono" data-stat="reply_footer">
      {props.generated_tokens} tokens · {props.tokens_per_s ?? "–"} tokens/s · 首字 first token {props.ttft_s ?? "–"} s
    </div>
  );
}

// One line under an assistant reply: tokens generated, decode speed, time to first token (measured), or, under a
// reply the app gave itself (props.by_app: the guide does not hold the answer), that the model was not asked; with Compare
// on, a line above it with the sampling the reply was drawn with (data-compare-label), shown while the reply streams.
// Its buttons: 运行状态 opens the live statistics (props.show, an action: on a phone they stay closed until asked
// for), and 朗读 reads the reply aloud with the browser's own speech synthesis (props.speech: the text, without the
// sources line, and its language), shown only where the browser has a voice of that language; a second tap stops it.
import { useEffect, useState } from "react";

const PREFIXES = { zh: ["zh", "cmn", "yue"], en: ["en"] };  // voices name Chinese zh-CN, zh_CN or cmn-Hans-CN

function hasVoice(lang) {
  const prefixes = PREFIXES[lang.slice(0, 2)] ?? [lang.slice(0, 2).toLowerCase()];
  return window.speechSynthesis.getVoices()
    .some((voice) => prefixes.some((prefix) => voice.lang.toLowerCase().startsWith(prefix)));
}

export default function ReplyFooter() {
  const [voiced, setVoiced] = useState(false);
  const [speaking, setSpeaking] = useState(false);
  const lang = props.speech?.lang;
  useEffect(() => {
    if (!lang || !window.speechSynthesis) return;
    const pick = () => setVoiced(hasVoice(lang));  // the browser may list its voices only later
    pick();
    window.speechSynthesis.addEventListener("voiceschanged", pick);
    return () => window.speechSynthesis.removeEventListener("voiceschanged", pick);
  }, [lang]);

  const readAloud = () => {
    window.speechSynthesis.cancel();
    if (speaking) {
      setSpeaking(false);
      return;
    }
    const utterance = new SpeechSynthesisUtterance(props.speech.text);
    utterance.lang = lang;  // the browser reads it with its voice of that language
    utterance.onend = utterance.onerror = () => setSpeaking(false);
    setSpeaking(true);
    window.speechSynthesis.speak(utterance);
  };

  const button = "rounded border px-2 py-1 text-foreground";
  const sans = { fontFamily: "var(--font-sans)" };  // the line is monospaced; its buttons are not
  return (
    <div className="text-xs text-muted-foreground font-mono flex flex-wrap items-center gap-x-3 gap-y-1"
         data-stat="reply_footer">
      {props.label && <div data-compare-label="" className="basis-full font-sans font-semibold text-foreground">⚖️ {props.label}</div>}
      {props.by_app && <span>应用的回答，未调用模型 the app's own reply, not the model's</span>}
      {!props.by_app && (!props.label || props.generated_tokens > 0) &&
        <span>{`${props.generated_tokens} tokens · ${props.tokens_per_s ?? "–"} tokens/s · 首字 first token ${props.ttft_s ?? "–"} s`}</span>}
      {props.show && props.generated_tokens > 0 && (
        <button data-show-stats="" className={button} style={sans} onClick={() => callAction({ name: props.show, payload: {} })}>
          📊 运行状态 Stats
        </button>
      )}
      {props.speech && voiced && (
        <button data-read-aloud={lang} aria-pressed={speaking} className={button} style={sans} onClick={readAloud}>
          {speaking ? "⏹ 停止朗读 Stop" : "🔊 朗读 Read aloud"}
        </button>
      )}
    </div>
  );
}

// Live statistics beside the chat. Every figure is measured by the app (see engine/memory.py,
// engine/metrics.py, ReplyStats) and arrives as props; this file only lays them out.
// Each value carries data-stat="<name>" so the browser tests can read it.

function Row({ label, stat, value, unit }) {
  return (
    <div className="flex justify-between gap-2 py-0.5">
      <span className="text-muted-foreground">{label}</span>
      <span className="font-mono tabular-nums">
        <span data-stat={stat}>{value ?? "–"}</span>{value != null && unit ? ` ${unit}` : ""}
      </span>
    </div>
  );
}

function Section({ title, children }) {
  return (
    <div className="mb-4">
      <div className="font-semibold mb-1">{title}</div>
      {children}
    </div>
  );
}

export default function StatsPanel() {
  const memory = props.memory || {};
  const reply = props.reply || {};
  const engine = props.engine || {};
  return (
    <div className="text-sm w-full">
      {memory.low && (
        <div data-stat="memory_warning" className="mb-3 rounded-md border border-red-500 p-2 text-red-500">
          内存不足：新的回答暂停，直到可用内存超过 {memory.min_available_mib} MiB。
          Low memory: new replies wait until more than {memory.min_available_mib} MiB is available.
        </div>
      )}
      <Section title="内存 Memory">
        <Row label="应用（PSS，含引擎进程）App (PSS, with engine)" stat="app_memory_mib" value={memory.app_mib} unit="MiB" />
        <Row label="系统已用 System used" stat="system_used_mib" value={memory.used_mib} unit="MiB" />
        <Row label="系统可用 System available" stat="system_available_mib" value={memory.available_mib} unit="MiB" />
        <Row label="KV 缓存占用 KV cache in use" stat="kv_cache_percent" value={engine.kv_cache_percent} unit="%" />
      </Section>
      <Section title={reply.streaming ? "本次回答（生成中）This reply (streaming)" : "上次回答 Last reply"}>
        <Row label="首字延迟 Time to first token" stat="ttft_s" value={reply.ttft_s} unit="s" />
        <Row label="解码速度 Decode speed" stat="tokens_per_s" value={reply.tokens_per_s} unit="tokens/s" />
        {engine.speculation_accepted_percent != null && (
          <Row label="推测采纳（启动以来）Speculation accepted (since start)" stat="speculation_accepted_percent"
               value={engine.speculation_accepted_percent} unit="%" />
        )}
        <Row label="提示词 Prompt tokens" stat="prompt_tokens" value={reply.prompt_tokens} />
        <Row label="已生成 Generated tokens" stat="generated_tokens" value={reply.generated_tokens} />
      </Section>
      <Section title="引擎 Engine">
        <Row label="运行中 Running" stat="running" value={engine.running} />
        <Row label="排队 Waiting" stat="waiting" value={engine.waiting} />
        <Row label="模型 Model" stat="model" value={engine.model} />
        <Row label="权重 Weights" stat="weights" value={engine.weights} />
        <Row label="计算精度 Compute dtype" stat="dtype" value={engine.dtype} />
        <Row label="线程 Threads" stat="threads" value={engine.threads} />
        <Row label="上下文 Context" stat="context" value={engine.context} unit="tokens" />
      </Section>
      <div className="text-xs text-muted-foreground" data-stat="updated">{props.updated}</div>
    </div>
  );
}

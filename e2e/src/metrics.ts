/** One sample of the Prometheus text format. */
export interface Sample {
  name: string
  labels: Record<string, string>
  value: number
}

/** Parses the Prometheus text exposition format (enough of it for the tests: no escapes in label values). */
export function parseMetrics(text: string): Sample[] {
  const samples: Sample[] = []
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)/.exec(line)
    if (!match?.[1] || match[3] === undefined) continue
    const labels: Record<string, string> = {}
    for (const pair of (match[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="([^"]*)"/g)) {
      if (pair[1]) labels[pair[1]] = pair[2] ?? ''
    }
    samples.push({ name: match[1], labels, value: Number(match[3]) })
  }
  return samples
}

/** Scrapes GET /metrics on a port of 127.0.0.1. */
export async function scrape(port: number): Promise<Sample[]> {
  const res = await fetch(`http://127.0.0.1:${port}/metrics`)
  if (res.status !== 200) throw new Error(`GET /metrics answered ${res.status}`)
  if (!String(res.headers.get('content-type')).startsWith('text/plain'))
    throw new Error('not Prometheus text')
  return parseMetrics(await res.text())
}

/** The sum of the samples named `name` whose labels include `labels`. */
export function total(samples: Sample[], name: string, labels: Record<string, string> = {}): number {
  return samples
    .filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v))
    .reduce((sum, s) => sum + s.value, 0)
}

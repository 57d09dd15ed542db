// autocannon ships no type declarations: the part of its programmatic API the bench uses.
declare module 'autocannon' {
  export interface Options {
    url: string
    connections?: number
    duration?: number
    method?: 'GET' | 'POST'
    headers?: Record<string, string>
    body?: string
    pipelining?: number
    timeout?: number
    expectBody?: string
  }
  export interface Histogram {
    average: number
    mean: number
    stddev: number
    min: number
    max: number
    total: number
    p50: number
    p90: number
    p99: number
  }
  export interface Result {
    requests: Histogram & { sent: number }
    latency: Histogram
    errors: number
    timeouts: number
    non2xx: number
    mismatches: number
    duration: number
  }
  export default function autocannon(opts: Options): Promise<Result>
}

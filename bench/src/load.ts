/**
 * One load generator of the scaling bench (`invoke.ts --gateways G --renders R`): autocannon in a
 * process of its own, one per gateway, so that the G generators do not share one event loop (one
 * autocannon saturates a core long before six gateways do).
 *
 * Started by `startLoadGenerator` (processes.ts). Writes `{"ready":true}` once autocannon is
 * loaded, then reads one job per line on stdin (autocannon's options as JSON, `expectBody`
 * included: the response check stays on in every generator), runs it and writes the result as one
 * JSON line on stdout. Exits when stdin closes.
 */
import { createInterface } from 'node:readline'
import autocannon, { type Options, type Result } from 'autocannon'

const write = (value: unknown) => process.stdout.write(`${JSON.stringify(value)}\n`)

write({ ready: true })
for await (const line of createInterface({ input: process.stdin })) {
  if (line.trim() === '') continue
  const result = await autocannon(JSON.parse(line) as Options)
  // The fields the bench reads; autocannon's whole result also holds every sample and its histograms.
  const out: Result = {
    requests: result.requests,
    latency: result.latency,
    errors: result.errors,
    timeouts: result.timeouts,
    non2xx: result.non2xx,
    mismatches: result.mismatches,
    duration: result.duration,
  }
  write(out)
}

/**
 * A progress bar in a few lines: redrawn in place with `\r` on a terminal, one line per
 * change otherwise (logs, CI, tests).
 */
export interface ProgressOutput {
  write(text: string): unknown
  isTTY?: boolean
}

export function renderBar(done: number, total: number, width = 30): string {
  const ratio = total > 0 ? Math.min(1, done / total) : 0
  const filled = Math.round(ratio * width)
  return `[${'#'.repeat(filled)}${'-'.repeat(width - filled)}] ${done}/${total} ${Math.round(ratio * 100)}%`
}

export class ProgressBar {
  private readonly out: ProgressOutput
  private last = ''

  constructor(out: ProgressOutput) {
    this.out = out
  }

  update(done: number, total: number, suffix = ''): void {
    const line = `${renderBar(done, total)}${suffix ? ` ${suffix}` : ''}`
    if (line === this.last) return
    this.last = line
    this.out.write(this.out.isTTY ? `\r${line}\u001b[K` : `${line}\n`)
  }

  finish(): void {
    if (this.out.isTTY && this.last) this.out.write('\n')
  }
}

import type { Split } from '@pm/contracts'
import { describe, expect, it } from 'vitest'
import {
  splitServedBy,
  auditFilterProblems,
  auditFiltersFrom,
  auditFiltersToParams,
  describeTarget,
  initialSplitRows,
  isoToLocal,
  localToIso,
  observedShares,
  sameTarget,
  splitProblems,
  splitRequest,
  splitTotal,
} from '../src/release.ts'

const A = 'aaaaaaaaaaaaaaaaaaaaaaaa'
const B = 'bbbbbbbbbbbbbbbbbbbbbbbb'
const C = 'cccccccccccccccccccccccc'

const split = (weights: [string, number, number, number?][]): Split => ({
  id: 'ffffffffffffffffffffffff',
  variants: weights.map(([versionId, version, weight, invocations]) => ({
    versionId,
    version,
    weight,
    ...(invocations !== undefined ? { invocations } : {}),
  })),
})

describe('the split editor', () => {
  it('accepts 2 to 5 different versions with whole weights from 1 to 99 that sum to 100', () => {
    const rows = [
      { versionId: A, weight: '90' },
      { versionId: B, weight: ' 10 ' },
    ]
    expect(splitTotal(rows)).toBe(100)
    expect(splitProblems(rows)).toEqual([])
    expect(splitRequest(rows)).toEqual([
      { versionId: A, weight: 90 },
      { versionId: B, weight: 10 },
    ])
  })

  it('says what is wrong: the sum, a missing or repeated version, a weight out of range, the count', () => {
    expect(
      splitProblems([
        { versionId: A, weight: '60' },
        { versionId: B, weight: '30' },
      ]),
    ).toEqual(['The weights add up to 90%; they must add up to 100%.'])
    expect(
      splitProblems([
        { versionId: A, weight: '50' },
        { versionId: A, weight: '50' },
      ]),
    ).toEqual(['Each version can appear only once.'])
    expect(
      splitProblems([
        { versionId: A, weight: '50' },
        { versionId: '', weight: '50' },
      ]),
    ).toEqual(['Choose a version in every row.'])
    expect(
      splitProblems([
        { versionId: A, weight: '100' },
        { versionId: B, weight: '0' },
      ]),
    ).toEqual(['Each weight is a whole number from 1 to 99.'])
    expect(
      splitProblems([
        { versionId: A, weight: '50.5' },
        { versionId: B, weight: '49.5' },
      ]),
    ).toContain('Each weight is a whole number from 1 to 99.')
    expect(splitProblems([{ versionId: A, weight: '100' }])[0]).toBe('A split has 2 to 5 versions.')
  })

  it('starts from the split in place, or the two newest versions half and half', () => {
    expect(
      initialSplitRows(
        split([
          [B, 2, 70],
          [A, 1, 30],
        ]),
        [C, B, A],
      ),
    ).toEqual([
      { versionId: B, weight: '70' },
      { versionId: A, weight: '30' },
    ])
    expect(initialSplitRows(undefined, [C, B, A])).toEqual([
      { versionId: C, weight: '50' },
      { versionId: B, weight: '50' },
    ])
  })
})

describe('promotes', () => {
  it('are described as a version or a split', () => {
    expect(describeTarget({ versionId: A, version: 3 })).toBe('v3')
    expect(
      describeTarget({
        versionId: B,
        version: 2,
        split: split([
          [B, 2, 90],
          [A, 1, 10],
        ]),
      }),
    ).toBe('v2 90% · v1 10%')
  })

  it('are the same target when they pin the same version, or the same split weights', () => {
    expect(sameTarget({ versionId: A, version: 1 }, { versionId: A, version: 1 })).toBe(true)
    expect(sameTarget({ versionId: A, version: 1 }, { versionId: B, version: 2 })).toBe(false)
    const s = split([
      [A, 1, 50],
      [B, 2, 50],
    ])
    expect(sameTarget({ versionId: A, version: 1 }, { versionId: A, version: 1, split: s })).toBe(false)
    expect(
      sameTarget(
        { versionId: A, version: 1, split: s },
        {
          versionId: A,
          version: 1,
          split: {
            ...split([
              [A, 1, 50],
              [B, 2, 50],
            ]),
            id: '0'.repeat(24),
          },
        },
      ),
    ).toBe(true)
    expect(
      sameTarget(
        { versionId: A, version: 1, split: s },
        {
          versionId: A,
          version: 1,
          split: split([
            [A, 1, 60],
            [B, 2, 40],
          ]),
        },
      ),
    ).toBe(false)
  })

  it("show each variant's observed share, none before anything is counted", () => {
    expect(
      observedShares(
        split([
          [A, 1, 50, 30],
          [B, 2, 50, 10],
        ]),
      ),
    ).toEqual([75, 25])
    expect(
      observedShares(
        split([
          [A, 1, 50],
          [B, 2, 50],
        ]),
      ),
    ).toEqual([null, null])
  })
})

describe('the audit log filters', () => {
  it('round-trip through the URL, blanks dropped, the page kept apart', () => {
    const filters = { action: 'environment.promoted', resourceId: A, from: '2026-01-01T00:00:00.000Z' }
    const params = auditFiltersToParams(filters, 3)
    expect(params.toString()).toBe(
      `action=environment.promoted&resourceId=${A}&from=2026-01-01T00%3A00%3A00.000Z&page=3`,
    )
    expect(auditFiltersFrom(params)).toEqual(filters)
    expect(auditFiltersFrom(new URLSearchParams('actor=&action=+'))).toEqual({})
  })

  it('are checked as the service checks them', () => {
    expect(auditFilterProblems({ action: 'prompt.published', resourceId: A })).toEqual([])
    expect(auditFilterProblems({ action: 'Prompt Published' })).toEqual([
      'An action is lower case, like prompt.published.',
    ])
    expect(auditFilterProblems({ resourceId: 'a b' })).toEqual([
      'A resource id has letters, digits, - and _ only.',
    ])
    expect(auditFilterProblems({ from: '2026-02-01T00:00:00.000Z', to: '2026-01-01T00:00:00.000Z' })).toEqual(
      ['"From" is after "To".'],
    )
  })

  it('turn a local time field into a timestamp and back; a "to" bound covers its whole minute', () => {
    const iso = localToIso('2026-03-04T05:06')
    expect(isoToLocal(iso)).toBe('2026-03-04T05:06')
    expect(new Date(localToIso('2026-03-04T05:06', true)).getTime() - new Date(iso).getTime()).toBe(59_999)
    expect(localToIso('')).toBe('')
    expect(isoToLocal(undefined)).toBe('')
  })
})

describe('splitServedBy', () => {
  it('names the version once an invoke was rendered, and no placeholder before', () => {
    expect(splitServedBy(2)).toBe(
      'Under a split each invoke picks a variant; this one was served by version 2.',
    )
    expect(splitServedBy(undefined)).toBe('Under a split each invoke picks a variant.')
  })
})

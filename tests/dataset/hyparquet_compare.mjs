// The independent side of tests/test_dataset_hyparquet.sh: for each pair MACT_JSON PARQUET on the command line,
// reads PARQUET with hyparquet (+ hyparquet-compressors for ZSTD/GZIP) and compares its rows with MACT_JSON
// (`mact dataset dump` of the same file): every row, every field, exactly (numbers as doubles; float32 values
// print exactly with %.17g; int64 as integers, binary as hex, lists as arrays, structs as objects). One node
// process for a whole dataset: the per-file launches cost more than the reading. Prints one line per file,
//   EQUAL|MISMATCH file=F rows=N values=N row_groups=N codecs=A+B encodings=A+B diffs=N
// (up to 5 DIFF lines before a MISMATCH), or UNREADABLE file=F: why; exits 1 if any file is not EQUAL.
import { readFileSync } from 'node:fs'
import { parquetReadObjects, parquetMetadata } from 'hyparquet'
import { compressors } from 'hyparquet-compressors'

const conv = (v) => {
  if (v === null || v === undefined) return null
  if (typeof v === 'bigint') return Number(v)
  if (v instanceof Uint8Array) return Buffer.from(v).toString('hex')
  if (Array.isArray(v) || ArrayBuffer.isView(v)) return Array.from(v, conv)
  if (typeof v === 'object') { const o = {}; for (const k of Object.keys(v)) o[k] = conv(v[k]); return o }
  return v
}

async function readRef(path) {
  const buf = readFileSync(path)
  const file = buf.buffer.slice(buf.byteOffset, buf.byteOffset + buf.byteLength)
  const rows = await parquetReadObjects({ file, compressors, utf8: false })
  const md = parquetMetadata(file)
  const encodings = new Set(), codecs = new Set()
  for (const rg of md.row_groups) for (const c of rg.columns) { c.meta_data.encodings.forEach(e => encodings.add(e)); codecs.add(c.meta_data.codec) }
  return { row_groups: md.row_groups.length, encodings: [...encodings].sort(), codecs: [...codecs].sort(), rows: rows.map(conv) }
}

function compare(mine, ref) {
  let diffs = 0, values = 0
  const cmp = (a, b, where) => {
    if (Array.isArray(a) || Array.isArray(b)) {
      if (!Array.isArray(a) || !Array.isArray(b) || a.length !== b.length) { if (diffs++ < 5) console.log(`DIFF ${where}: ${JSON.stringify(a)?.slice(0, 80)} vs ${JSON.stringify(b)?.slice(0, 80)}`); return }
      a.forEach((x, i) => cmp(x, b[i], `${where}[${i}]`)); return
    }
    if (a && typeof a === 'object') { for (const k of new Set([...Object.keys(a), ...Object.keys(b || {})])) cmp(a[k], (b || {})[k], `${where}.${k}`); return }
    values++
    if (!(a === b || (typeof a === 'number' && typeof b === 'number' && Object.is(a, b)))) { if (diffs++ < 5) console.log(`DIFF ${where}: ${a} vs ${b}`) }
  }
  if (mine.length !== ref.rows.length) { console.log(`DIFF rows: ${mine.length} vs ${ref.rows.length}`); diffs++ }
  else cmp(mine, ref.rows, 'row')
  return { diffs, values }
}

let bad = 0
const args = process.argv.slice(2)
if (args.length === 0 || args.length % 2) { console.log('usage: hyparquet_compare.mjs MACT_JSON PARQUET [MACT_JSON PARQUET ...]'); process.exit(2) }
for (let i = 0; i < args.length; i += 2) {
  const [mj, pq] = [args[i], args[i + 1]]
  let ref
  try { ref = await readRef(pq) } catch (e) { console.log(`UNREADABLE file=${pq}: ${e && e.message}`); bad++; continue }
  const mine = JSON.parse(readFileSync(mj, 'utf8'))
  const { diffs, values } = compare(mine, ref)
  if (diffs) bad++
  console.log(`${diffs ? 'MISMATCH' : 'EQUAL'} file=${pq} rows=${mine.length} values=${values} row_groups=${ref.row_groups} codecs=${ref.codecs.join('+')} encodings=${ref.encodings.join('+')} diffs=${diffs}`)
}
process.exit(bad ? 1 : 0)

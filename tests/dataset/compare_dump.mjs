// Compares `mact dataset dump` output (argv[2]) with hyparquet_dump.mjs output (argv[3]): every row, every
// field, exactly (numbers compared as doubles; float32 values print exactly with %.17g). Prints a summary.
import { readFileSync } from 'node:fs'
const mine = JSON.parse(readFileSync(process.argv[2], 'utf8'))
const ref = JSON.parse(readFileSync(process.argv[3], 'utf8'))
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
console.log(`${diffs ? 'MISMATCH' : 'EQUAL'} rows=${mine.length} values=${values} row_groups=${ref.row_groups} codecs=${ref.codecs.join('+')} encodings=${ref.encodings.join('+')} diffs=${diffs}`)
process.exit(diffs ? 1 : 0)

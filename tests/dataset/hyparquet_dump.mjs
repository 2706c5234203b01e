// Independent parquet reader for the cross-check (tests/test_dataset_hyparquet.sh): prints FILE's rows as
// JSON in `mact dataset dump`'s form (numbers as numbers, int64 as integers, binary as hex, strings as
// strings, lists as arrays, structs as objects), read with hyparquet (+ hyparquet-compressors for ZSTD/GZIP).
import { readFileSync } from 'node:fs'
import { parquetReadObjects, parquetMetadata } from 'hyparquet'
import { compressors } from 'hyparquet-compressors'

const buf = readFileSync(process.argv[2])
const file = buf.buffer.slice(buf.byteOffset, buf.byteOffset + buf.byteLength)
const rows = await parquetReadObjects({ file, compressors, utf8: false })
const conv = (v) => {
  if (v === null || v === undefined) return null
  if (typeof v === 'bigint') return Number(v)
  if (v instanceof Uint8Array) return Buffer.from(v).toString('hex')
  if (Array.isArray(v) || ArrayBuffer.isView(v)) return Array.from(v, conv)
  if (typeof v === 'object') { const o = {}; for (const k of Object.keys(v)) o[k] = conv(v[k]); return o }
  return v
}
const md = parquetMetadata(file)
const encodings = new Set(), codecs = new Set()
for (const rg of md.row_groups) for (const c of rg.columns) { c.meta_data.encodings.forEach(e => encodings.add(e)); codecs.add(c.meta_data.codec) }
process.stdout.write(JSON.stringify({ row_groups: md.row_groups.length, encodings: [...encodings].sort(), codecs: [...codecs].sort(), rows: rows.map(conv) }))

/**
 * CSV as RFC 4180 writes it, read a record at a time from a stream. Reading recovers from a bad
 * record: it is answered as an error with its line number and reading goes on at the next
 * record (csv-parse, which the audience import uses, stops at the first bad record or loses
 * the rest of the file after a stray quote), so an import can report every bad line and keep
 * the good ones.
 */

/**
 * A record: its first and last line's numbers (from 1; a quoted field may hold line breaks) and
 * its cells, or why it is not one.
 */
export type CsvRecord = { line: number; lastLine: number } & ({ cells: string[] } | { error: string });

/** A record longer than this (characters) is refused: a stray quote must not swallow the file. */
export const MAX_CSV_RECORD = 16 * 1024;

// What a spreadsheet reads as the start of a formula (OWASP, CSV injection): such a cell is
// written with a single quote before it, which spreadsheets show as text. A cell that only
// looks guarded ('=) gets one quote more, so reading takes exactly one off and every cell
// comes back as it was written.
const FORMULA = /^'*[=+\-@\t\r]/;
const GUARDED = /^'+[=+\-@\t\r]/;

/** The cell as it is written: a single quote before a formula. */
export const guardCell = (cell: string): string => (FORMULA.test(cell) ? `'${cell}` : cell);

/** The cell as it was before `guardCell`. */
export const unguardCell = (cell: string): string => (GUARDED.test(cell) ? cell.slice(1) : cell);

const NEEDS_QUOTES = /[",\r\n]/;
const STRAY_QUOTE = "a quote inside an unquoted field (quote the field and double the quote)";

/** One record, every cell guarded, quoted where RFC 4180 needs it, CRLF-terminated. */
export function csvLine(cells: readonly string[]): string {
  const written = cells.map((cell) => {
    const guarded = guardCell(cell);
    return NEEDS_QUOTES.test(guarded) ? `"${guarded.replaceAll('"', '""')}"` : guarded;
  });
  const text = written.join(",");
  // A blank line is skipped on reading: a record that would be one is quoted.
  return text.trim() === "" ? `"${text}"\r\n` : `${text}\r\n`;
}

/** The cells of one record (its line terminator removed), or why it is not CSV. */
export function csvCells(raw: string): string[] | string {
  if (!raw.includes('"')) return raw.split(",");
  const cells: string[] = [];
  let i = 0;
  for (;;) {
    if (raw[i] === '"') {
      let value = "";
      let from = i + 1;
      for (;;) {
        const quote = raw.indexOf('"', from);
        if (quote === -1) return "unterminated quoted field";
        value += raw.slice(from, quote);
        if (raw[quote + 1] === '"') {
          value += '"';
          from = quote + 2;
          continue;
        }
        i = quote + 1;
        break;
      }
      cells.push(value);
      if (i === raw.length) return cells;
      if (raw[i] !== ",") return "text after a closing quote";
      i++;
    } else {
      const comma = raw.indexOf(",", i);
      const value = raw.slice(i, comma === -1 ? raw.length : comma);
      if (value.includes('"')) return STRAY_QUOTE;
      cells.push(value);
      if (comma === -1) return cells;
      i = comma + 1;
    }
  }
}

const INCOMPLETE = -1;
const UNTERMINATED = -2;

/**
 * The records of a stream of UTF-8 bytes (or text), one at a time, holding one chunk and one
 * record in memory whatever the size of the input. Blank lines are skipped; a byte-order mark
 * is dropped. A record holding bytes that are not UTF-8, a field quoted wrongly, or a record
 * longer than `maxRecord` characters (a quote never closed) is answered as an error on the line
 * it starts on, and reading goes on at the next line: a stray quote costs its own line only,
 * never the lines a bad record would have swallowed.
 */
export async function* csvRecords(
  chunks: AsyncIterable<Uint8Array | string> | Iterable<Uint8Array | string>,
  maxRecord = MAX_CSV_RECORD,
): AsyncGenerator<CsvRecord> {
  const decoder = new TextDecoder("utf-8");
  let text = "";
  let line = 1;
  let started = false;
  // After a line too long to hold: the rest of it is dropped up to its newline.
  let skipping = false;

  /** The records complete in `text`; what is left of it waits for the next chunk. */
  function take(final: boolean): CsvRecord[] {
    const records: CsvRecord[] = [];
    // The first quote at or after the last position asked for (-1: none in the rest of `text`),
    // kept across records so a file without quotes is not searched to its end for each.
    let quoteAt = -2;
    const quoteFrom = (from: number) => {
      if (quoteAt !== -1 && quoteAt < from) quoteAt = text.indexOf('"', from);
      return quoteAt;
    };
    // The quote a record left open (UNTERMINATED), to say whether it opened a field or strayed into one.
    let unclosed = -1;
    /** Where the record at `pos` ends: the first newline outside quotes. */
    const endOf = (pos: number): number => {
      let newline = text.indexOf("\n", pos);
      for (let i = pos; ; ) {
        const open = quoteFrom(i);
        if (open === -1 || (newline !== -1 && newline < open)) {
          return newline !== -1 ? newline : final ? text.length : INCOMPLETE;
        }
        const close = quoteFrom(open + 1);
        if (close === -1) {
          unclosed = open;
          return final ? UNTERMINATED : INCOMPLETE;
        }
        i = close + 1;
        if (newline !== -1 && newline < i) newline = text.indexOf("\n", i);
      }
    };
    let pos = 0;
    /** Refuses the record at `pos` and reads on at its second line. */
    const refuse = (error: string) => {
      records.push({ line, lastLine: line, error });
      const newline = text.indexOf("\n", pos);
      quoteAt = -2; // reading goes back to where the search for quotes has been
      line++;
      if (newline === -1) {
        skipping = !final;
        pos = text.length;
      } else pos = newline + 1;
    };
    while (pos < text.length) {
      if (skipping) {
        const newline = text.indexOf("\n", pos);
        if (newline === -1) {
          pos = text.length;
          break;
        }
        pos = newline + 1;
        skipping = false;
        continue;
      }
      const end = endOf(pos);
      if (end === INCOMPLETE && text.length - pos <= maxRecord) break;
      if (end < 0 || end - pos > maxRecord) {
        if (end !== UNTERMINATED) refuse(`longer than ${maxRecord} characters`);
        else refuse(unclosed === pos || text[unclosed - 1] === "," ? "unterminated quoted field" : STRAY_QUOTE);
        continue;
      }
      let raw = text.slice(pos, end);
      let breaks = 0;
      for (let n = raw.indexOf("\n"); n !== -1; n = raw.indexOf("\n", n + 1)) breaks++;
      if (raw.endsWith("\r")) raw = raw.slice(0, -1);
      // The decoder puts U+FFFD where the bytes were not UTF-8.
      const cells = raw.includes("\uFFFD") ? "not UTF-8" : csvCells(raw);
      if (typeof cells === "string") {
        refuse(cells);
        continue;
      }
      const at = line;
      line += breaks + 1;
      pos = end + 1;
      if (raw.trim() !== "") records.push({ line: at, lastLine: at + breaks, cells });
    }
    text = text.slice(pos);
    return records;
  }

  for await (const chunk of chunks) {
    text += typeof chunk === "string" ? chunk : decoder.decode(chunk, { stream: true });
    if (!started && text.length > 0) {
      started = true;
      if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
    }
    yield* take(false);
  }
  text += decoder.decode();
  if (!started && text.charCodeAt(0) === 0xfeff) text = text.slice(1);
  yield* take(true);
}

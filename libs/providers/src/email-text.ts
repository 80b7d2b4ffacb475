import { compile, type FormatCallback, type HtmlToTextOptions } from "html-to-text";

/**
 * A table cell as a browser's text of the page shows it: its content, then a space before the
 * next cell's. html-to-text keeps cells inline with nothing between them, which ran every cell of
 * a row, and every row of a table, into one word ("Item 1$3.70Item 2$7.40").
 */
const tableCell: FormatCallback = (elem, walk, builder) => {
  walk(elem.children, builder);
  builder.addInline(" ");
};

// html-to-text's defaults, except: no hard wrapping (mail clients wrap), images dropped rather
// than shown as bare URLs, headings kept in their case, a link's URL only when it differs from
// its text, and each table row on a line of its own with its cells apart (HTML email is laid out
// in tables; html-to-text reads a table as one block of inline text).
const TEXT_OPTIONS: HtmlToTextOptions = {
  wordwrap: false,
  formatters: { tableCell },
  selectors: [
    { selector: "img", format: "skip" },
    { selector: "a", options: { hideLinkHrefIfSameAsText: true } },
    ...["h1", "h2", "h3", "h4", "h5", "h6"].map((selector) => ({ selector, options: { uppercase: false } })),
    { selector: "tr", format: "block", options: { leadingLineBreaks: 1, trailingLineBreaks: 1 } },
    { selector: "td", format: "tableCell" },
    { selector: "th", format: "tableCell" },
  ],
};

/**
 * Compiled once: `convert` builds its selector decision tree again on every call, a cost every
 * email would pay.
 */
const toText = compile(TEXT_OPTIONS);

/**
 * A readable text/plain alternative of an email's html body, for every email provider: mail
 * without one scores worse with spam filters. Empty for a body with no text (only images).
 */
export const htmlToText = (html: string): string => toText(html).trim();

import fc from "fast-check";
import t from "tap";
import { htmlToText } from "../src/email-text.js";

t.test("a table's rows are lines of their own and its cells stay apart", async (t) => {
  const receipt =
    "<h1>Your order</h1><table>" +
    '<tr><th>Item</th><th align="right">Price</th></tr>' +
    '<tr><td><a href="https://shop.example/i/1">Tea</a></td><td>$3.70</td></tr>' +
    "<tr><td>Cups</td><td>$7.40</td></tr>" +
    "</table><p>Thanks!</p>";
  t.equal(htmlToText(receipt), "Your order\n\nItem Price\nTea [https://shop.example/i/1] $3.70\nCups $7.40\n\nThanks!");
});

t.test("an email laid out in nested tables reads as its blocks, in order", async (t) => {
  const layout =
    '<table width="100%"><tr><td align="center"><table width="600">' +
    '<tr><td><img src="https://cdn.example/logo.png" alt="Logo"></td></tr>' +
    "<tr><td><h2>Hello Ada</h2><p>Your code is <b>123456</b>.</p></td></tr>" +
    "<tr><td>Left column</td><td>Right column</td></tr>" +
    "</table></td></tr></table>";
  t.equal(htmlToText(layout), "Hello Ada\n\nYour code is 123456.\n\nLeft column Right column");
});

t.test("text outside tables is as before: paragraphs, links, no images, empty when only images", async (t) => {
  t.equal(
    htmlToText('<p>Hello &amp; welcome, Ada</p><p><a href="https://x.example/v">Verify</a></p>'),
    "Hello & welcome, Ada\n\nVerify [https://x.example/v]",
  );
  t.equal(htmlToText('<img src="https://cdn.example/a.png">'), "");
});

t.test("every cell's words survive, a row's cells joined by a space and each row on its line", async () => {
  const word = fc.stringMatching(/^[A-Za-z0-9$.]{1,12}$/);
  const table = fc.array(fc.array(word, { minLength: 1, maxLength: 5 }), { minLength: 1, maxLength: 6 });
  fc.assert(
    fc.property(table, fc.boolean(), (rows, wrapped) => {
      const cells = (row: string[]) => row.map((cell) => `<td>${cell}</td>`).join("");
      const html = `<table>${rows.map((row) => `<tr>${cells(row)}</tr>`).join("")}</table>`;
      const text = htmlToText(wrapped ? `<div><p>Before</p>${html}<p>After</p></div>` : html);
      const lines = rows.map((row) => row.join(" ")).join("\n");
      return text === (wrapped ? `Before\n\n${lines}\n\nAfter` : lines);
    }),
  );
});

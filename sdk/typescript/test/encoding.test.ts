/** conformance/encoding.json: schemas → sizes and place values; rows → codes; codes → values. */
import assert from "node:assert/strict";
import { test } from "node:test";
import { floatBits } from "../src/float64.js";
import type { JsonObject } from "../src/json.js";
import { encodeColumns, encodeRows } from "../src/rows.js";
import type { RawValue } from "../src/raw-values.js";
import { Schema } from "../src/schema.js";
import { cases, str, stringify, vectors } from "./vectors.js";

const doc = vectors("encoding.json");

for (const c of cases(doc, "cases")) {
  test(`encoding: ${str(c["id"])}`, () => {
    const schema = Schema.parse(c["schema"]);
    assert.equal(String(schema.privateDomainSize), c["private_domain_size"]);
    assert.equal(String(schema.publicDomainSize), c["public_domain_size"]);
    const sizes = c["attribute_sizes"] as JsonObject;
    assert.deepEqual(Object.fromEntries(schema.attributes.map((a) => [a.name, String(a.size)])), { ...sizes });
    assert.deepEqual(
      schema.privateAttributes.map((a) => a.name),
      c["private_attributes"],
    );
    assert.deepEqual(
      schema.publicAttributes.map((a) => a.name),
      c["public_attributes"],
    );
    assert.deepEqual(schema.privatePlaceValues.map(String), c["private_place_values"]);
    assert.deepEqual(schema.publicPlaceValues.map(String), c["public_place_values"]);
    // The text of the schema parses the same as the object.
    assert.equal(String(Schema.parse(stringify(c["schema"]!)).privateDomainSize), c["private_domain_size"]);

    const rows = c["rows"] as JsonObject[];
    const values = rows.map((r) => r["values"] as Record<string, RawValue>);
    const names = Object.keys(values[0]!);
    const columns = Object.fromEntries(names.map((n) => [n, values.map((v) => v[n])]));
    for (const encoded of [encodeColumns(schema, columns), encodeRows(schema, values)]) {
      rows.forEach((row, i) => {
        assert.equal(String(encoded.privateCodes[i]), row["private_code"], `row ${i}`);
        assert.deepEqual(
          encoded.publicCodes.map((col) => String(col[i])),
          row["public_codes"],
          `row ${i}`,
        );
        assert.equal(String(schema.publicKeyOf(encoded.publicCodes.map((col) => col[i]!))), row["public_key"]);
      });
    }
    for (const item of [...rows, ...(c["decodes"] as JsonObject[])]) {
      const code = BigInt(str(item["private_code"]));
      const digits = schema.privateDigits(code);
      assert.deepEqual(digits.map(String), item["private_digits"]);
      assert.equal(schema.privateCodeOf(digits), code);
      const decoded = schema.decodePrivate(code);
      const expected = item["decoded"] as JsonObject;
      for (const attr of schema.privateAttributes) {
        const value = decoded.get(attr.name)!;
        const shown = attr.type === "continuous" ? floatBits(value as number) : String(value);
        assert.equal(shown, expected[attr.name], attr.name);
        // A decoded value encodes back to its own digit.
        assert.equal(attr.encode(value), digits[schema.privateAttributes.indexOf(attr)]);
      }
    }
  });
}

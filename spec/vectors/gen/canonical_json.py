#!/usr/bin/env python3
"""Writes spec/vectors/canonical_json.json, the RFC 8785 (JCS) vectors of a2a.

Run from the repository root:  python3 spec/vectors/gen/canonical_json.py

Every expected output below is written by hand from RFC 8785. When `node` is on the PATH, each valid case is also
checked against an independent reference: ECMAScript's own JSON.parse + the JCS serializer of RFC 8785 Appendix
(Object.keys(...).sort() compares UTF-16 code units; JSON.stringify writes numbers with Number.prototype.toString).
The script refuses to write the file when the two disagree. The committed JSON is the source of truth for the tests.
"""

import json
import os
import shutil
import struct
import subprocess
import sys

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "canonical_json.json")

groups = []


def group(name, description):
    g = {"type": "JcsCanonicalization", "name": name, "description": description, "tests": []}
    groups.append(g)
    return g


def valid(g, comment, text, expected, flags=(), **extra):
    g["tests"].append(
        {"comment": comment, "flags": list(flags), "input": {"json": text, **extra}, "expected": expected,
         "result": "valid"}
    )


def invalid(g, comment, error, text=None, hexbytes=None, flags=(), **extra):
    inp = {"json": text} if hexbytes is None else {"hex": hexbytes}
    inp.update(extra)
    g["tests"].append({"comment": comment, "flags": list(flags), "input": inp, "result": "invalid", "error": error})


# --- RFC 8785 examples -------------------------------------------------------------------------------------------
g = group("rfc8785_examples", "The worked examples of RFC 8785 (§3.2.2 sample, §3.2.3 sorting example).")
valid(
    g,
    "RFC 8785 §3.2.2: primitive data types (numbers, escapes, literals) and whitespace removal",
    '{\n  "numbers": [333333333.33333329, 1E30, 4.50,\n              2e-3, 0.000000000000000000000000001],\n'
    '  "string": "\\u20ac$\\u000F\\u000aA\'\\u0042\\u0022\\u005c\\\\\\"\\/",\n  "literals": [null, true, false]\n}',
    '{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],'
    '"string":"\u20ac$\\u000f\\nA\'B\\"\\\\\\\\\\"/"}',
    flags=["rfc8785"],
)
valid(
    g,
    "RFC 8785 §3.2.3: member names sorted as arrays of UTF-16 code units",
    '{\n  "\\u20ac": "Euro Sign",\n  "\\r": "Carriage Return",\n  "\\ufb33": "Hebrew Letter Dalet With Dagesh",\n'
    '  "1": "One",\n  "\\ud83d\\ude00": "Emoji: Grinning Face",\n  "\\u0080": "Control",\n'
    '  "\\u00f6": "Latin Small Letter O With Diaeresis"\n}',
    '{"\\r":"Carriage Return","1":"One","\u0080":"Control","\u00f6":"Latin Small Letter O With Diaeresis",'
    '"\u20ac":"Euro Sign","\U0001F600":"Emoji: Grinning Face","\ufb33":"Hebrew Letter Dalet With Dagesh"}',
    flags=["rfc8785", "utf16_order"],
)

# --- RFC 8785 Appendix B -----------------------------------------------------------------------------------------
g = group(
    "rfc8785_appendix_b",
    "Every row of RFC 8785 Appendix B. input.ieee754 is the double's bit pattern (hex); input.json is a JSON number "
    "that parses to exactly that double (its shortest round-trip form).",
)
APPENDIX_B = [
    ("0000000000000000", "0", "Zero"),
    ("8000000000000000", "0", "Minus zero"),
    ("0000000000000001", "5e-324", "Min pos number"),
    ("8000000000000001", "-5e-324", "Min neg number"),
    ("7fefffffffffffff", "1.7976931348623157e+308", "Max pos number"),
    ("ffefffffffffffff", "-1.7976931348623157e+308", "Max neg number"),
    ("4340000000000000", "9007199254740992", "Max pos int"),
    ("c340000000000000", "-9007199254740992", "Max neg int"),
    ("4430000000000000", "295147905179352830000", "~2**68"),
    ("7fffffffffffffff", None, "NaN"),
    ("7ff0000000000000", None, "Infinity"),
    ("44b52d02c7e14af5", "9.999999999999997e+22", ""),
    ("44b52d02c7e14af6", "1e+23", ""),
    ("44b52d02c7e14af7", "1.0000000000000001e+23", ""),
    ("444b1ae4d6e2ef4e", "999999999999999700000", ""),
    ("444b1ae4d6e2ef4f", "999999999999999900000", ""),
    ("444b1ae4d6e2ef50", "1e+21", ""),
    ("3eb0c6f7a0b5ed8c", "9.999999999999997e-7", ""),
    ("3eb0c6f7a0b5ed8d", "0.000001", ""),
    ("41b3de4355555553", "333333333.3333332", ""),
    ("41b3de4355555554", "333333333.33333325", ""),
    ("41b3de4355555555", "333333333.3333333", ""),
    ("41b3de4355555556", "333333333.3333334", ""),
    ("41b3de4355555557", "333333333.33333343", ""),
    ("becbf647612f3696", "-0.0000033333333333333333", ""),
    ("43143ff3c1cb0959", "1424953923781206.2", "Round to even"),
]
for hexbits, expected, comment in APPENDIX_B:
    f = struct.unpack(">d", bytes.fromhex(hexbits))[0]
    label = f"Appendix B {hexbits}" + (f": {comment}" if comment else "")
    if expected is None:
        text = "NaN" if f != f else "Infinity"
        invalid(g, label + " (not representable in JSON)", "non_finite_number", text, flags=["rfc8785", "non_finite"],
                ieee754=hexbits)
    else:
        valid(g, label, repr(f), expected, flags=["rfc8785", "number"], ieee754=hexbits)

# --- numbers -------------------------------------------------------------------------------------------------------
g = group("numbers", "Number parsing (IEEE-754 double, round to nearest even) and ECMAScript serialization.")
for text, expected, comment, flags in [
    ("1e21", "1e+21", "1e21 is the first power of ten written with an exponent", []),
    ("1e20", "100000000000000000000", "1e20 is written in full", []),
    ("1e-7", "1e-7", "1e-7 is written with an exponent (no zero padding)", []),
    ("1e-6", "0.000001", "1e-6 is written in full", []),
    ("0.000001", "0.000001", "0.000001 stays", []),
    ("0.00001", "0.00001", "0.00001 stays", []),
    ("-1e-7", "-1e-7", "negative small number", []),
    ("-0", "0", "minus zero is 0", ["negative_zero"]),
    ("-0.0", "0", "minus zero as a fraction is 0", ["negative_zero"]),
    ("-0e10", "0", "minus zero with exponent is 0", ["negative_zero"]),
    ("0.0", "0", "zero as a fraction", []),
    ("0E-5", "0", "zero with exponent", []),
    ("5e-324", "5e-324", "smallest subnormal", []),
    ("2.4703282292062328e-324", "5e-324", "just above half the smallest subnormal rounds up to it", ["rounded"]),
    ("2.4703282292062327e-324", "0", "exactly half the smallest subnormal (in decimal, below) rounds to 0", ["rounded"]),
    ("1e-400", "0", "underflow rounds to 0 (accepted, as ECMAScript's JSON.parse does)", ["rounded"]),
    ("1.7976931348623157e308", "1.7976931348623157e+308", "largest double", []),
    ("1.7976931348623158e308", "1.7976931348623157e+308", "rounds down to the largest double", ["rounded"]),
    ("-1.7976931348623157e308", "-1.7976931348623157e+308", "most negative double", []),
    ("9007199254740991", "9007199254740991", "2^53 - 1", []),
    ("9007199254740992", "9007199254740992", "2^53", []),
    ("9007199254740993", "9007199254740992", "2^53 + 1 is not a double: rounds to even", ["rounded"]),
    ("-9007199254740993", "-9007199254740992", "-(2^53 + 1) rounds to even", ["rounded"]),
    ("9007199254740995", "9007199254740996", "2^53 + 3 rounds to even (up)", ["rounded"]),
    ("123456789012345678901234567890", "1.2345678901234568e+29", "30-digit integer", ["rounded"]),
    ("12345678901234567890", "12345678901234567000", "20-digit integer below 1e21 is written in full", ["rounded"]),
    ("999999999999999", "999999999999999", "15-digit integer", []),
    ("-999999999999999", "-999999999999999", "negative 15-digit integer", []),
    ("1000000000000001", "1000000000000001", "16-digit integer, exact", []),
    ("10000000000000001", "10000000000000000", "17-digit integer, rounded", ["rounded"]),
    ("0.1", "0.1", "0.1", []),
    ("0.2", "0.2", "0.2", []),
    ("0.30000000000000004", "0.30000000000000004", "the double nearest 0.1 + 0.2", []),
    ("0.3", "0.3", "0.3 is not 0.1 + 0.2", []),
    ("1.0", "1", "integral fraction loses its .0", []),
    ("1E2", "100", "upper-case exponent", []),
    ("1e2", "100", "lower-case exponent", []),
    ("1E+2", "100", "explicit plus in the exponent", []),
    ("100e-2", "1", "exponent that makes an integer", []),
    ("4.50", "4.5", "trailing zero of the fraction", []),
    ("2e-3", "0.002", "small number written in full", []),
    ("0.000000000000000000000000001", "1e-27", "small number written with an exponent", []),
    ("333333333.33333329", "333333333.3333333", "more digits than a double holds", ["rounded"]),
    ("1E30", "1e+30", "large exponent", []),
    ("123.456e5", "12345600", "fraction and exponent giving an integer", []),
    ("1.5", "1.5", "simple fraction", []),
    ("-1.5e-10", "-1.5e-10", "negative with two-digit negative exponent", []),
    ("1e+0", "1", "exponent zero", []),
    ("1.00000000000000011102230246251565404236316680908203125", "1",
     "exactly halfway between 1 and the next double: ties to even (1)", ["rounded"]),
    ("1.00000000000000011102230246251565404236316680908203126", "1.0000000000000002",
     "just above halfway between 1 and the next double rounds up", ["rounded"]),
    ("0." + "0" * 300 + "1", "1e-301", "302 digits after the point", []),
    ("1" + "0" * 308, "1e+308", "309-digit integer", []),
    ("[1,-1,0.5,-0.5,1e100]", "[1,-1,0.5,-0.5,1e+100]", "numbers in an array", []),
]:
    valid(g, comment, text, expected, flags=["number", *flags])

# --- strings -------------------------------------------------------------------------------------------------------
g = group("strings", "String escaping (RFC 8785 §3.2.2.2): only the seven short escapes and \\u00xx for other controls.")
for text, expected, comment, flags in [
    ('"\\"\\\\\\/\\b\\f\\n\\r\\t"', '"\\"\\\\/\\b\\f\\n\\r\\t"', "every short escape; \\/ becomes /", []),
    ('"\\u0000\\u0001\\u0007\\u000b\\u000e\\u001f"', '"\\u0000\\u0001\\u0007\\u000b\\u000e\\u001f"',
     "other controls as \\u00xx", []),
    ('"\\u001F\\u000B"', '"\\u001f\\u000b"', "upper-case hex becomes lower-case", []),
    ('"\\u0008\\u000c\\u000A\\u000D\\u0009\\u0022\\u005C"', '"\\b\\f\\n\\r\\t\\"\\\\"',
     "\\u escapes of characters with a short escape use the short escape", []),
    ('"\\u0020\\u0041\\u007e"', '" A~"', "escaped printable ASCII becomes literal", []),
    ('"\\u007f"', '"\u007f"', "DEL is not escaped", []),
    ('"\u007f"', '"\u007f"', "literal DEL stays", []),
    ('"/"', '"/"', "solidus stays unescaped", []),
    ('"\\u00e9"', '"\u00e9"', "escaped non-ASCII becomes literal UTF-8", ["non_ascii"]),
    ('"\u00e9\u65e5\u672c\u8a9e"', '"\u00e9\u65e5\u672c\u8a9e"', "literal non-ASCII stays", ["non_ascii"]),
    ('"\\u0080\\u07ff\\u0800\\uffff"', '"\u0080\u07ff\u0800\uffff"', "boundaries of the UTF-8 lengths",
     ["non_ascii", "noncharacter"]),
    ('"\\ufdd0\\ufffe"', '"\ufdd0\ufffe"', "noncharacters are accepted and copied", ["non_ascii", "noncharacter"]),
    ('"\\u2028\\u2029"', '"\u2028\u2029"', "U+2028 and U+2029 are not escaped", ["non_ascii"]),
    ('"\u2028\u2029"', '"\u2028\u2029"', "literal U+2028 and U+2029 stay", ["non_ascii"]),
    ('"\\ud83d\\ude00"', '"\U0001F600"', "surrogate pair becomes one literal character", ["non_ascii", "surrogate_pair"]),
    ('"\\uD83D\\uDE00"', '"\U0001F600"', "upper-case surrogate pair", ["non_ascii", "surrogate_pair"]),
    ('"\\ud800\\udc00\\udbff\\udfff"', '"\U00010000\U0010FFFF"', "first and last supplementary characters",
     ["non_ascii", "surrogate_pair"]),
    ('"\U0001F600"', '"\U0001F600"', "literal supplementary character stays", ["non_ascii"]),
    ('"e\\u0301"', '"e\u0301"', "no Unicode normalization: e + combining acute stays decomposed", ["non_ascii"]),
    ('"\\t"', '"\\t"', "escaped tab", []),
    ('""', '""', "empty string", []),
    ('"a\\u0000b"', '"a\\u0000b"', "NUL inside a string", []),
]:
    valid(g, comment, text, expected, flags=["string", *flags])

# --- ordering ------------------------------------------------------------------------------------------------------
g = group("ordering", "Member order: names compared as arrays of UTF-16 code units, after unescaping; arrays keep order.")
for text, expected, comment, flags in [
    ('{"\\ue000":1,"\\ud800\\udc00":2}', '{"\U00010000":2,"\ue000":1}',
     "U+10000 (UTF-16 D800 DC00) sorts before U+E000, unlike code point or UTF-8 order", ["utf16_order"]),
    ('{"\\uffff":1,"\\ud83d\\ude00":2,"\\ud7ff":3}', '{"\ud7ff":3,"\U0001F600":2,"\uffff":1}',
     "supplementary characters sort between U+D7FF and U+E000", ["utf16_order", "noncharacter"]),
    ('{"\\uff61":1,"\\ud83d\\ude00x":2}',
     '{"\U0001F600x":2,"\uff61":1}', "halfwidth ideographic full stop after an emoji", ["utf16_order"]),
    ('{"b":1,"a":2,"aa":3,"":4}', '{"":4,"a":2,"aa":3,"b":1}', "empty name first; a prefix sorts first", []),
    ('{"a":1,"B":2,"_":3,"0":4}', '{"0":4,"B":2,"_":3,"a":1}', "ASCII order: digits, upper case, _, lower case", []),
    ('{"10":1,"2":2,"1":3}', '{"1":3,"10":1,"2":2}', "numeric-looking names sort as strings", []),
    ('{"\\u0062":1,"a":2}', '{"a":2,"b":1}', "escaped names sort by what they stand for", []),
    ('{"\\u00e9":1,"e\\u0301":2,"f":3}', '{"e\u0301":2,"f":3,"\u00e9":1}', "no normalization before sorting",
     ["non_ascii"]),
    ('{"b":[3,1,2],"a":{"d":1,"c":[{"z":1,"y":2}]}}', '{"a":{"c":[{"y":2,"z":1}],"d":1},"b":[3,1,2]}',
     "every nested object is sorted; arrays keep their order", []),
    ('{"\\n":1,"\\u0000":2,"\\"":3,"\\\\":4}', '{"\\u0000":2,"\\n":1,"\\"":3,"\\\\":4}',
     "names that need escaping sort by their unescaped code units", []),
    ('{"a":{"x":1},"b":{"x":2}}', '{"a":{"x":1},"b":{"x":2}}', "the same name in sibling objects is not a duplicate", []),
]:
    valid(g, comment, text, expected, flags=["ordering", *flags])

# --- structure ----------------------------------------------------------------------------------------------------
g = group("structure", "Whitespace, empty containers, top-level scalars, nesting.")
deep = "[" * 128 + "]" * 128
for text, expected, comment, flags in [
    (' \t\n\r{ "a" : [ 1 , 2 ] ,\n "b":{ } } \n', '{"a":[1,2],"b":{}}', "insignificant whitespace is removed", []),
    ("{}", "{}", "empty object", []),
    ("[]", "[]", "empty array", []),
    ("[{}]", "[{}]", "array of an empty object", []),
    ('{"a":{}}', '{"a":{}}', "object holding an empty object", []),
    ("[[],[[]]]", "[[],[[]]]", "nested empty arrays", []),
    ("null", "null", "top-level null", ["top_level_scalar"]),
    ("true", "true", "top-level true", ["top_level_scalar"]),
    ("false", "false", "top-level false", ["top_level_scalar"]),
    ("0", "0", "top-level zero", ["top_level_scalar"]),
    (" -1.50 ", "-1.5", "top-level number with whitespace", ["top_level_scalar"]),
    ('"x"', '"x"', "top-level string", ["top_level_scalar"]),
    ("[null,true,false]", "[null,true,false]", "literals in an array", []),
    (deep, deep, "128 nested arrays (MAX_DEPTH) are accepted", ["depth"]),
    ('{"a":' * 127 + "[1]" + "}" * 127, '{"a":' * 127 + "[1]" + "}" * 127, "128 levels of objects and arrays",
     ["depth"]),
    (
        '{"target_capability":"generate_brief_summary","timeout_ms":30000,"proposed_schema":{"type":"object",'
        '"required":["title"],"properties":{"title":{"type":"string"},"timestamp":{"type":"string",'
        '"format":"date-time"},"score":{"type":["number","null"]}}}}',
        '{"proposed_schema":{"properties":{"score":{"type":["number","null"]},"timestamp":{"format":"date-time",'
        '"type":"string"},"title":{"type":"string"}},"required":["title"],"type":"object"},'
        '"target_capability":"generate_brief_summary","timeout_ms":30000}',
        "a NEGOTIATE request body",
        ["protocol"],
    ),
]:
    valid(g, comment, text, expected, flags=[*flags])

# --- invalid ---------------------------------------------------------------------------------------------------------
g = group("invalid", "Inputs that are not UTF-8 I-JSON: refused with the reason in `error` (protocol error invalid_json).")
for text, error, comment in [
    ("", "empty_input", "empty input"),
    (" \n\t", "empty_input", "only whitespace"),
    ("{", "unexpected_end", "unclosed object"),
    ("[1,", "unexpected_end", "unclosed array after a comma"),
    ('"abc', "unexpected_end", "unterminated string"),
    ('{"a":', "unexpected_end", "missing member value"),
    ('{"a"', "unexpected_end", "missing colon at the end"),
    ("tru", "unexpected_end", "truncated literal"),
    ("1.", "unexpected_end", "number ending with a point"),
    ("-", "unexpected_end", "lone minus"),
    ('"\\u12', "unexpected_end", "truncated \\u escape"),
    ('"\\', "unexpected_end", "truncated escape"),
    ('"\\ud83d', "unexpected_end", "input ends after a high surrogate"),
    ("{a:1}", "unexpected_character", "unquoted member name"),
    ("['a']", "unexpected_character", "single-quoted string"),
    ("[1 2]", "unexpected_character", "missing comma"),
    ('{"a" 1}', "unexpected_character", "missing colon"),
    ('{"a":1 "b":2}', "unexpected_character", "missing comma between members"),
    ("[1;2]", "unexpected_character", "semicolon separator"),
    ("\u000b1", "unexpected_character", "vertical tab is not JSON whitespace"),
    ("\u00a0[]", "unexpected_character", "no-break space is not JSON whitespace"),
    ("[0x10]", "unexpected_character", "hexadecimal number"),
    ("{,}", "unexpected_character", "comma without members"),
    ("[,1]", "unexpected_character", "leading comma"),
    ("/*c*/1", "unexpected_character", "comment"),
    ("True", "unexpected_character", "capitalized literal"),
    ("nul!", "invalid_literal", "misspelt null"),
    ("[fals]", "invalid_literal", "truncated false inside an array"),
    ("[truee]", "unexpected_character", "literal followed by a letter"),
    ("+1", "invalid_number", "plus sign"),
    (".5", "invalid_number", "no integer part"),
    ("[1.]", "invalid_number", "no digit after the point"),
    ("[1.e5]", "invalid_number", "no digit between point and exponent"),
    ("[1e]", "invalid_number", "no exponent digits"),
    ("[1e+]", "invalid_number", "no exponent digits after the sign"),
    ("[-a]", "invalid_number", "minus without digits"),
    ("[- 1]", "invalid_number", "space after minus"),
    ("01", "leading_zero", "leading zero"),
    ("-01", "leading_zero", "negative with leading zero"),
    ("[00]", "leading_zero", "double zero"),
    ("00.5", "leading_zero", "leading zero before a fraction"),
    ("NaN", "non_finite_number", "NaN"),
    ("Infinity", "non_finite_number", "Infinity"),
    ("-Infinity", "non_finite_number", "-Infinity"),
    ("[+Infinity]", "non_finite_number", "+Infinity"),
    ("1e400", "number_out_of_range", "overflows a double"),
    ("-1e400", "number_out_of_range", "overflows a double, negative"),
    ("1.7976931348623159e308", "number_out_of_range", "rounds to infinity"),
    ("1" + "0" * 309, "number_out_of_range", "310-digit integer"),
    ('"a\u0001b"', "control_character", "unescaped U+0001"),
    ('"\u0000"', "control_character", "unescaped NUL"),
    ('"a\tb"', "control_character", "unescaped tab"),
    ('"a\nb"', "control_character", "unescaped line feed"),
    ('{"\u001f":1}', "control_character", "unescaped control in a member name"),
    ('"\\x41"', "invalid_escape", "\\x escape"),
    ('"\\\'"', "invalid_escape", "escaped single quote"),
    ('"\\u12G4"', "invalid_escape", "non-hex digit in \\u"),
    ('"\\U0041"', "invalid_escape", "upper-case \\U"),
    ('"\\a"', "invalid_escape", "\\a escape"),
    ('"\\ud800"', "lone_surrogate", "lone high surrogate"),
    ('"\\udc00"', "lone_surrogate", "lone low surrogate"),
    ('"\\ud800\\u0041"', "lone_surrogate", "high surrogate followed by a BMP escape"),
    ('"\\udc00\\ud800"', "lone_surrogate", "surrogates in the wrong order"),
    ('"\\ud800x"', "lone_surrogate", "high surrogate followed by a character"),
    ('"\\ud800\\ud800"', "lone_surrogate", "two high surrogates"),
    ('{"\\udfff":1}', "lone_surrogate", "lone surrogate in a member name"),
    ('{"a":1,"a":2}', "duplicate_key", "duplicate member name"),
    ('{"a":1,"a":1}', "duplicate_key", "duplicate member with the same value"),
    ('{"a":1,"\\u0061":2}', "duplicate_key", "duplicate after unescaping"),
    ('{"\U0001F600":1,"\\ud83d\\ude00":2}', "duplicate_key", "duplicate after unescaping a surrogate pair"),
    ('{"x":{"b":1,"a":2,"b":3}}', "duplicate_key", "duplicate in a nested object"),
    ("[1,]", "trailing_comma", "trailing comma in an array"),
    ('{"a":1,}', "trailing_comma", "trailing comma in an object"),
    ("[1,\n]", "trailing_comma", "trailing comma before whitespace"),
    ("{} x", "trailing_data", "garbage after the value"),
    ("1 2", "trailing_data", "two values"),
    ("[1]]", "trailing_data", "extra closing bracket"),
    ("{}{}", "trailing_data", "two objects"),
    ('"a""b"', "trailing_data", "two strings"),
    ("null\u0000", "trailing_data", "NUL after the value"),
    ("[" * 129 + "]" * 129, "too_deep", "129 nested arrays"),
    ('{"a":' * 129 + "1" + "}" * 129, "too_deep", "129 nested objects"),
]:
    invalid(g, comment, error, text)

for hexbytes, error, comment in [
    ('22ff22', "invalid_utf8", "byte 0xFF in a string"),
    ('22c0af22', "invalid_utf8", "overlong encoding of /"),
    ('22eda08022', "invalid_utf8", "UTF-8 encoded surrogate U+D800 (CESU/WTF-8)"),
    ('22eda0bdedb88022', "invalid_utf8", "CESU-8 encoded surrogate pair"),
    ('22e28222', "invalid_utf8", "truncated three-byte sequence"),
    ('22f4908080', "invalid_utf8", "code point above U+10FFFF"),
    ('7b22c3223a317d', "invalid_utf8", "truncated sequence in a member name"),
    ('22e282', "invalid_utf8", "truncated sequence at the end of the input"),
    ('5bff5d', "unexpected_character", "byte 0xFF outside a string"),
    ('efbbbf7b7d', "unexpected_character", "byte order mark"),
]:
    invalid(g, comment, error, hexbytes=hexbytes, flags=["raw_bytes"])


NOTES = {
    "rfc8785": "Taken from RFC 8785.",
    "number": "Number parsing and ECMAScript Number.prototype.toString serialization.",
    "negative_zero": "-0 is written 0.",
    "rounded": "The input is not exactly a double; it is rounded to the nearest (ties to even).",
    "non_finite": "The value has no JSON representation.",
    "string": "String escaping.",
    "non_ascii": "Non-ASCII characters, written as literal UTF-8.",
    "noncharacter": "Unicode noncharacters (U+FDD0..U+FDEF, U+xFFFE, U+xFFFF): accepted and copied.",
    "surrogate_pair": "A \\u escape pair that stands for one supplementary character.",
    "ordering": "Object member order.",
    "utf16_order": "UTF-16 code unit order differs from code point (and UTF-8 byte) order here.",
    "top_level_scalar": "A JSON text whose value is not an object or array.",
    "depth": "Nesting depth, limit 128 (MAX_DEPTH).",
    "protocol": "A message of the a2a protocol.",
    "raw_bytes": "input.hex holds the raw input bytes (the input is not valid UTF-8 text or starts with a BOM).",
}

# --- optional independent check against ECMAScript ----------------------------------------------------------------
JS = r"""
const cases = JSON.parse(require('fs').readFileSync(0, 'utf8'));
function jcs(v) {
  if (v === null || typeof v !== 'object') return JSON.stringify(v);
  if (Array.isArray(v)) return '[' + v.map(jcs).join(',') + ']';
  return '{' + Object.keys(v).sort().map(k => JSON.stringify(k) + ':' + jcs(v[k])).join(',') + '}';
}
process.stdout.write(JSON.stringify(cases.map(t => jcs(JSON.parse(t)))));
"""


def check_with_node(tests):
    node = shutil.which("node")
    if node is None:
        print("node not found: skipping the ECMAScript cross-check", file=sys.stderr)
        return
    texts = [t["input"]["json"] for t in tests]
    got = json.loads(subprocess.run([node, "-e", JS], input=json.dumps(texts), capture_output=True, text=True,
                                    check=True).stdout)
    bad = [(t["comment"], t["expected"], g) for t, g in zip(tests, got) if t["expected"] != g]
    for comment, want, have in bad:
        print(f"MISMATCH {comment}: vector {want!r} ECMAScript {have!r}", file=sys.stderr)
    if bad:
        sys.exit(1)
    print(f"ECMAScript agrees on all {len(tests)} valid cases", file=sys.stderr)


def main():
    tc = 0
    all_tests = []
    for g in groups:
        for t in g["tests"]:
            tc += 1
            t["tcId"] = tc
            all_tests.append(t)
    for t in all_tests:
        for f in t["flags"]:
            assert f in NOTES, f
    check_with_node([t for t in all_tests if t["result"] == "valid"])
    doc = {
        "algorithm": "A2A-JCS",
        "spec_refs": ["RFC 8785", "RFC 7493", "RFC 8259", "spec/PROTOCOL.md JCS-1..JCS-22"],
        "header": [
            "RFC 8785 canonical JSON as a2a requires it (spec/PROTOCOL.md, requirements JCS-*).",
            "input.json is the input as text (UTF-8); input.hex the raw input bytes. expected is the canonical output "
            "as text. error is the rejection reason (CanonicalError reason); the protocol error is always invalid_json.",
            "Regenerate: python3 spec/vectors/gen/canonical_json.py (cross-checks every valid case against node when "
            "present).",
        ],
        "notes": NOTES,
        "numberOfTests": tc,
        "testGroups": groups,
    }
    ordered = [{k: t[k] for k in ("tcId", "comment", "flags", "input", "expected", "result", "error") if k in t}
               for t in all_tests]
    i = 0
    for g in groups:
        n = len(g["tests"])
        g["tests"] = ordered[i:i + n]
        i += n
    with open(OUT, "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"wrote {tc} tests to {os.path.normpath(OUT)}", file=sys.stderr)


main()

#!/usr/bin/env python3
"""Writes spec/vectors/canonical_json_python.json: where the seed's Python recipe
json.dumps(json.loads(text), sort_keys=True, separators=(',', ':')) agrees with RFC 8785 (JCS) and where it does not.

Run from the repository root:  python3 spec/vectors/gen/python_json.py

python_output is produced here by really running the recipe on this interpreter (json.loads with its defaults, then
json.dumps with ensure_ascii=True, the default). expected, the JCS output, is written by hand from RFC 8785 and is
checked by the Rust tests against a2a_core::canonical.
"""

import json
import os
import platform
import sys

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "canonical_json_python.json")


def recipe(text):
    return json.dumps(json.loads(text), sort_keys=True, separators=(",", ":"))


VALID = [
    # (comment, json text, JCS output, flags)
    ("ASCII names and strings, small integers, literals", '{"b":1,"a":[true,false,null,"x y"],"c":-7}',
     '{"a":[true,false,null,"x y"],"b":1,"c":-7}', ["ascii"]),
    ("nested objects with ASCII names", '{"z":{"b":0,"a":{"d":1,"c":2}},"y":[]}',
     '{"y":[],"z":{"a":{"c":2,"d":1},"b":0}}', ["ascii"]),
    ("integers up to 2^53", "[0,9007199254740991,-9007199254740991]", "[0,9007199254740991,-9007199254740991]",
     ["ascii"]),
    ("-0 read as the integer 0", "-0", "0", ["ascii"]),
    ("non-integral floats in Python's and ECMAScript's common range", "[0.5,-2.25,3.14159,0.1,0.30000000000000004]",
     "[0.5,-2.25,3.14159,0.1,0.30000000000000004]", ["float_agrees"]),
    ("1e21 as a float: both write 1e+21", "1e21", "1e+21", ["float_agrees"]),
    ("1e22 and 1.5e300: both use e+", "[1e22,1.5e300]", "[1e+22,1.5e+300]", ["float_agrees"]),
    ("two-digit negative exponents agree", "[1e-10,2.5e-15]", "[1e-10,2.5e-15]", ["float_agrees"]),
    ("extreme doubles", "[5e-324,1.7976931348623157e308]", "[5e-324,1.7976931348623157e+308]", ["float_agrees"]),
    ("0.0001 is written in full by both", "0.0001", "0.0001", ["float_agrees"]),
    ("control characters are escaped identically", '"\\u0001\\u001f\\n\\t\\"\\\\"', '"\\u0001\\u001f\\n\\t\\"\\\\"',
     ["ascii"]),
    ("/ and \\/ are written / by both", '"/\\/"', '"//"', ["ascii"]),
    ("DEL: Python escapes it (ensure_ascii covers everything outside 0x20..0x7E), JCS writes it literally",
     '"\\u007f"', '"\u007f"', ["ensure_ascii"]),
    ("non-ASCII in a string: Python escapes it (ensure_ascii)", '"\\u00e9t\\u00e9"', '"\u00e9t\u00e9"',
     ["ensure_ascii"]),
    ("CJK text: escaped by Python", '"\u65e5\u672c"', '"\u65e5\u672c"', ["ensure_ascii"]),
    ("supplementary character: Python writes a surrogate pair escape", '"\\ud83d\\ude00"', '"\U0001F600"',
     ["ensure_ascii"]),
    ("U+2028 and U+2029: escaped by Python", '"\\u2028\\u2029"', '"\u2028\u2029"', ["ensure_ascii"]),
    ("non-ASCII member name (order agrees, escaping differs)", '{"\\u00e9":1,"e":2}', '{"e":2,"\u00e9":1}',
     ["ensure_ascii"]),
    ("U+E000 vs U+10000: Python sorts by code point, JCS by UTF-16 code units", '{"\\ue000":1,"\\ud800\\udc00":2}',
     '{"\U00010000":2,"\ue000":1}', ["key_order", "ensure_ascii"]),
    ("emoji vs U+FB33 (RFC 8785 §3.2.3): Python puts the emoji last", '{"\\ud83d\\ude00":1,"\\ufb33":2}',
     '{"\U0001F600":1,"\ufb33":2}', ["key_order", "ensure_ascii"]),
    ("integral float 1.0: Python 1.0, JCS 1", "1.0", "1", ["integral_float"]),
    ("1E2: Python 100.0, JCS 100", "1E2", "100", ["integral_float"]),
    ("100e-2: Python 1.0, JCS 1", "100e-2", "1", ["integral_float"]),
    ("-0.0: Python -0.0, JCS 0", "-0.0", "0", ["integral_float"]),
    ("1e-7: Python pads the exponent (1e-07)", "1e-7", "1e-7", ["exponent_format"]),
    ("1e-6: Python 1e-06, JCS 0.000001", "1e-6", "0.000001", ["exponent_format"]),
    ("0.00001: Python 1e-05, JCS 0.00001", "0.00001", "0.00001", ["exponent_format"]),
    ("1e16: Python 1e+16, JCS in full", "1e16", "10000000000000000", ["exponent_format"]),
    ("1.5e20: Python 1.5e+20, JCS in full", "1.5e20", "150000000000000000000", ["exponent_format"]),
    ("2^53 + 1 as an integer: Python keeps it exact, JCS rounds to a double", "9007199254740993",
     "9007199254740992", ["big_integer"]),
    ("30-digit integer: Python exact, JCS a double", "123456789012345678901234567890", "1.2345678901234568e+29",
     ["big_integer"]),
    ("10^21 written as an integer: Python in full, JCS 1e+21", "1000000000000000000000", "1e+21", ["big_integer"]),
]

INVALID = [
    # (comment, json text, JCS reason, flags): Python's json.loads accepts these, JCS refuses them.
    ("NaN: Python reads and writes it (not JSON)", "NaN", "non_finite_number", ["python_accepts_invalid"]),
    ("1e400: Python reads inf and writes Infinity (not JSON)", "1e400", "number_out_of_range",
     ["python_accepts_invalid"]),
    ("duplicate names: Python keeps the last", '{"a":1,"a":2}', "duplicate_key", ["python_accepts_invalid"]),
    ("lone surrogate: Python keeps it", '"\\ud800"', "lone_surrogate", ["python_accepts_invalid"]),
    ("400-digit integer: Python keeps it exact", "1" + "0" * 399, "number_out_of_range", ["python_accepts_invalid"]),
]

NOTES = {
    "python_agrees": "The recipe's output is byte for byte the JCS output.",
    "python_differs": "The recipe's output differs from the JCS output.",
    "ascii": "Only ASCII strings and integers within +-2^53: the case where the recipe agrees with JCS.",
    "float_agrees": "A double that Python's repr and ECMAScript write alike.",
    "ensure_ascii": "Python escapes DEL and every non-ASCII character as \\uXXXX (surrogate pairs above U+FFFF); "
                    "JCS writes them as literal UTF-8.",
    "key_order": "Python sorts names by code point; JCS by UTF-16 code units.",
    "integral_float": "Python writes an integral float with .0 (and -0.0); JCS writes 1 (and 0).",
    "exponent_format": "Python switches to exponent form at 1e16 and below 1e-4 and pads the exponent to 2 digits; "
                       "ECMAScript at 1e21 and below 1e-6, without padding.",
    "big_integer": "Python keeps integers exact; JCS reads every number as a double.",
    "python_accepts_invalid": "Python's json module accepts an input that JCS (I-JSON) refuses.",
}


def check_with_rfc8785(tests):
    """When the `rfc8785` package (PyPI) is installed, checks that it agrees with every expected JCS output."""
    try:
        import rfc8785
    except ImportError:
        print("rfc8785 not installed: skipping that cross-check", file=sys.stderr)
        return
    checked = refused = 0
    for t in tests:
        try:
            got = rfc8785.dumps(json.loads(t["input"]["json"])).decode("utf-8")
        except rfc8785.IntegerDomainError:
            refused += 1  # integers beyond 2^53 - 1: rfc8785 refuses rather than rounds
            continue
        if got != t["expected"]:
            sys.exit(f"rfc8785 disagrees on {t['comment']!r}: {got!r} != {t['expected']!r}")
        checked += 1
    print(f"rfc8785 agrees on {checked} cases (refused {refused} big integers)", file=sys.stderr)


def main():
    tests = []
    for comment, text, expected, flags in VALID:
        out = recipe(text)
        verdict = "python_agrees" if out == expected else "python_differs"
        tests.append({"comment": comment, "flags": [verdict, *flags], "input": {"json": text, "python_output": out},
                      "expected": expected, "result": "valid"})
    invalid = []
    for comment, text, reason, flags in INVALID:
        out = recipe(text)
        invalid.append({"comment": comment, "flags": ["python_differs", *flags],
                        "input": {"json": text, "python_output": out}, "result": "invalid", "error": reason})
    check_with_rfc8785(tests)
    all_tests = tests + invalid
    for i, t in enumerate(all_tests, 1):
        t["tcId"] = i
        for f in t["flags"]:
            assert f in NOTES, f
    order = ("tcId", "comment", "flags", "input", "expected", "result", "error")
    tidy = lambda ts: [{k: t[k] for k in order if k in t} for t in ts]  # noqa: E731
    doc = {
        "algorithm": "A2A-JCS-PYTHON",
        "spec_refs": ["RFC 8785", "spec/PROTOCOL.md JCS-23..JCS-24"],
        "header": [
            "The seed's recipe json.dumps(json.loads(text), sort_keys=True, separators=(',', ':')) compared with JCS.",
            "input.python_output is what the recipe really printed (Python " + platform.python_version() + "); "
            "expected is the JCS output; the python_agrees / python_differs flag says whether they are equal.",
            "Regenerate: python3 spec/vectors/gen/python_json.py",
        ],
        "notes": NOTES,
        "numberOfTests": len(all_tests),
        "testGroups": [
            {"type": "PythonRecipe", "name": "python_recipe_valid",
             "description": "Valid I-JSON: the recipe's bytes against JCS.", "tests": tidy(tests)},
            {"type": "PythonRecipe", "name": "python_recipe_invalid",
             "description": "Not I-JSON: the recipe produces output, JCS refuses the input.", "tests": tidy(invalid)},
        ],
    }
    with open(OUT, "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=False, indent=1)
        f.write("\n")
    agree = sum(1 for t in tests if "python_agrees" in t["flags"])
    print(f"wrote {len(all_tests)} tests ({agree} agree) to {os.path.normpath(OUT)}", file=sys.stderr)


main()

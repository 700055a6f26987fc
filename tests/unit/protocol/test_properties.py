"""The one ``.properties`` reader/writer (issue 11, defect 14), checked against
``java.util.Properties`` itself.

The Javadoc examples of ``Properties.load`` are spelled out below; every case is also loaded
(and every ``dump`` case stored) by a small Java program run with the JDK on this machine, so
the expected values are Java's, not ours. Before this module the broker read ``k1=\\u0041x``
as ``u0041x``, the CLI as ``Ax``, and perf refused ``k3 value``.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from moldau.protocol.properties import PropertiesError, dump, parse

# The examples of the java.util.Properties.load(Reader) Javadoc, with their documented results.
JAVADOC = [
    ("Truth = Beauty\n", {"Truth": "Beauty"}),
    ("  Truth:Beauty\n", {"Truth": "Beauty"}),
    ("Truth                    :Beauty\n", {"Truth": "Beauty"}),
    ("fruits                           apple, banana, pear, \\\n"
     "                                 cantaloupe, watermelon, \\\n"
     "                                 kiwi, mango\n",
     {"fruits": "apple, banana, pear, cantaloupe, watermelon, kiwi, mango"}),
    ("cheeses\n", {"cheeses": ""}),
    ("\\:\\=\n", {":=": ""}),  # "\:\=" is the two-character key ":="
    ("k=\\z\\b\\'\\\"\n", {"k": "zb'\""}),  # backslashes before other characters are dropped
]

# Everything the old parsers disagreed on, and the corners of Java's rules.
CASES = [
    "k1=\\u0041x\nk2 = value with trailing spaces   \nk3 value\nk4:v\n",
    "# comment\n! comment\n   # indented comment\n\n \t \f\nkey=v\n",
    "a=one \\\n   two\\\\\nb=three\\\\\\\n  four\n",
    "a=b\\\n# not a comment\n",
    "\\\n#comment after an empty continuation\nreal=1\n",
    "a=b\\\n\nc=d\n",
    "crlf=1\r\nold.mac=2\rnext=3\\\r\n   joined\r\n",
    "key\\ with\\ spaces = v\nkey\\:colon=v\nkey\\=eq=v\n",
    "k  =  = v\nk2 :: v\nk3 = : v\nk4\t\t=\tv\n",
    "tabs=\\t\\n\\r\\f end\nunicode=\\u00e9\\u20AC\\uD83D\\uDE00\n",
    "dup=1\ndup=2\n",
    "=empty key\n:also\nnokey\n",
    "trailing.backslash.at.eof=v\\",
    "multi=a\\\n\\\n\\\nb\n",
    "key\\\n  continued=v\n",
    "utf8=h\u00e9llo w\u00f6rld \u4e2d\n",
    "vt=a\x0bb\nnel=c\x85d\n",
    "bad=\\u12G4\n",
    "short=\\u12\n",
    "uu=\\uu0041\n",
]

# Values Properties.store must escape so that load reads them back.
DUMP_CASES = [
    {"plain": "value", "listeners": "PLAINTEXT://127.0.0.1:0", "path": "C:\\dir\\x"},
    {"key with space": " leading and trailing ", "#hash": "!bang", "a=b": "c:d"},
    {"ctl": "tab\tnew\nline\rret\fff", "uni": "\u00e9\u20ac\U0001f600"},
    {"": "", "empty": ""},
]

JAVA_PROGRAM = r"""
import java.io.*;
import java.nio.charset.StandardCharsets;
import java.nio.file.*;
import java.util.*;

public class PropsCheck {
    static String enc(String s) {
        StringBuilder b = new StringBuilder();
        for (char c : s.toCharArray()) {
            if (c > 0x20 && c < 0x7f && c != '\\') b.append(c);
            else b.append(String.format("\\u%04X", (int) c));
        }
        return b.toString();
    }
    static String unhex(String h) {
        byte[] out = new byte[h.length() / 2];
        for (int i = 0; i < out.length; i++)
            out[i] = (byte) Integer.parseInt(h.substring(2 * i, 2 * i + 2), 16);
        return new String(out, StandardCharsets.UTF_8);
    }
    public static void main(String[] args) throws Exception {
        for (String arg : args) {
            String text = Files.readString(Path.of(arg), StandardCharsets.UTF_8);
            if (arg.endsWith(".store")) {
                // Each line: hex(key) hex(value); print how store() writes the entry.
                for (String line : text.split("\n")) {
                    if (line.isEmpty()) continue;
                    String[] kv = line.split(" ", -1);
                    for (boolean unicode : new boolean[] {false, true}) {
                        Properties p = new Properties();
                        p.setProperty(unhex(kv[0]), unhex(kv[1]));
                        String written;
                        if (unicode) {
                            ByteArrayOutputStream out = new ByteArrayOutputStream();
                            p.store(out, null);
                            written = out.toString(StandardCharsets.ISO_8859_1);
                        } else {
                            StringWriter out = new StringWriter();
                            p.store(out, null);
                            written = out.toString();
                        }
                        String[] lines = written.split("\n");
                        System.out.println("STORE " + enc(lines[lines.length - 1]));
                    }
                }
                System.out.println("END");
                continue;
            }
            Properties p = new Properties();
            try {
                p.load(new StringReader(text));
            } catch (IllegalArgumentException e) {
                System.out.println("ERROR");
                System.out.println("END");
                continue;
            }
            TreeMap<String, String> sorted = new TreeMap<>();
            for (String k : p.stringPropertyNames()) sorted.put(k, p.getProperty(k));
            for (Map.Entry<String, String> e : sorted.entrySet())
                System.out.println("ENTRY " + enc(e.getKey()) + " " + enc(e.getValue()));
            System.out.println("END");
        }
    }
}
"""


def enc(text: str) -> str:
    """The Java program's rendering: printable ASCII but backslash as is, else \\uXXXX per
    UTF-16 unit."""
    units = text.encode("utf-16-be", "surrogatepass")
    out = []
    for i in range(0, len(units), 2):
        code = int.from_bytes(units[i:i + 2], "big")
        out.append(chr(code) if 0x20 < code < 0x7F and code != 0x5C else f"\\u{code:04X}")
    return "".join(out)


def rendered(text: str) -> list[str]:
    """What the Java program prints for ``text``, computed with :func:`parse`."""
    try:
        props = parse(text)
    except PropertiesError:
        return ["ERROR"]
    return [f"ENTRY {enc(k)} {enc(v)}" for k, v in sorted(props.items(),
                                                         key=lambda kv: kv[0].encode(
                                                             "utf-16-be", "surrogatepass"))]


@pytest.mark.parametrize(("text", "expected"), JAVADOC)
def test_javadoc_examples(text: str, expected: dict[str, str]) -> None:
    assert parse(text) == expected


def test_what_the_old_parsers_disagreed_on() -> None:
    assert parse(CASES[0]) == {"k1": "Ax", "k2": "value with trailing spaces   ",
                               "k3": "value", "k4": "v"}


def test_malformed_unicode_escape_names_the_line() -> None:
    with pytest.raises(PropertiesError, match=r"line 3: malformed \\uxxxx escape \\u12G4"):
        parse("a=1\n\nbad=\\u12G4\n")
    with pytest.raises(PropertiesError, match="line 2"):
        parse("a=1\nkey\\\n=\\u12\n")


@pytest.mark.parametrize("items", DUMP_CASES)
def test_dump_round_trips(items: dict[str, str]) -> None:
    assert parse(dump(items)) == items
    assert parse(dump(items, escape_unicode=True)) == items


@pytest.fixture(scope="module")
def java(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """Java's output for every case (JAVADOC, CASES, then the DUMP_CASES store lines)."""
    if shutil.which("javac") is None:
        pytest.fail("no JDK on PATH (javac): the comparison with java.util.Properties runs a "
                    ".java source file; `make test` installs default-jdk-headless, or run "
                    "`sudo apt-get install default-jdk-headless`")
    work = tmp_path_factory.mktemp("java-props")
    (work / "PropsCheck.java").write_text(JAVA_PROGRAM)
    files = []
    for i, text in enumerate([t for t, _ in JAVADOC] + CASES):
        path = work / f"case{i}.properties"
        path.write_bytes(text.encode("utf-8", "surrogatepass"))
        files.append(str(path))
    store = work / "dump.store"
    store.write_text("".join(f"{k.encode().hex()} {v.encode().hex()}\n"
                             for items in DUMP_CASES for k, v in items.items()))
    files.append(str(store))
    done = subprocess.run(["java", str(work / "PropsCheck.java"), *files], capture_output=True,
                          text=True, timeout=300, check=True)
    return done.stdout.split("END\n")[:-1]


def test_parse_matches_java(java: list[str]) -> None:
    texts = [t for t, _ in JAVADOC] + CASES
    assert len(java) == len(texts) + 1
    for text, expected in zip(texts, java, strict=False):
        assert rendered(text) == expected.splitlines(), text


def test_dump_matches_java_store(java: list[str]) -> None:
    expected = java[-1].splitlines()
    ours = []
    for items in DUMP_CASES:
        for key, value in items.items():
            for unicode in (False, True):
                line = dump({key: value}, escape_unicode=unicode).rstrip("\n")
                ours.append(f"STORE {enc(line)}")
    assert ours == expected


def test_meta_properties_are_read_and_written_with_these_rules(tmp_path: Path) -> None:
    from moldau.storage.meta import (
        MetaProperties,
        MetaPropertiesError,
        format_meta_properties,
        parse_meta_properties,
        read_meta_properties,
    )

    meta = MetaProperties(1, "MkU3OEVBNTcwNTJENDM2Qg", 3, "J8aAPcfLQt2bqs1JT_rMgQ",
                          {"odd key": "a:b=c #d"})
    text = format_meta_properties(meta)
    assert "odd\\ key=a\\:b\\=c \\#d\n" in text  # as Properties.store writes it
    assert parse_meta_properties(text) == meta
    (tmp_path / "meta.properties").write_text("version=1\nnode.id=\\u0031\ncluster.id=\\u00Z0\n")
    with pytest.raises(MetaPropertiesError, match=r"meta\.properties: .*line 3: malformed"):
        read_meta_properties(str(tmp_path))

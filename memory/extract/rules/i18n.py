"""Offline rule extractor, part 5: plain first-person statements in German,
Spanish, French, Russian and Japanese, said again in the third person in the
same language.

The same policy as the English clause rule (``clauses``), on a smaller
vocabulary: a statement at the start of a sentence whose verb is one of a
life ("ich arbeite als …", "trabajo en …", "j'habite à …", "я работаю …",
"私は…に住んでいます") becomes "X arbeitet als …", "X trabaja en …", "X habite
à …", "X работает …", "Xは…に住んでいます"; the copula too ("ich bin
Historikerin", "soy médica", "je suis papyrologue", "я — историк", "私は
学生です"). A negation keeps its word ("nicht", "kein", "no", "ne … pas",
"не", "ません"). Verbs of the conversation ("ich glaube", "creo", "je pense",
"я думаю", "と思います"), modals and wishes, questions, conditions and passing
states ("ich bin müde", "estoy cansada", "je suis fatigué", "я устал",
"疲れた") give nothing. Later first persons become the language's
third-person possessive where it has one that does not depend on the owner's
gender (Spanish "su", French "son/sa/ses", Russian reflexive "свой", the
name's genitive in German, "Xの" in Japanese).
"""

from __future__ import annotations

import re
from collections.abc import Callable

Said = tuple[str, str, str]  # (fact, type, rule name)

# A clause ends at a comma (what follows is mostly another clause:
# "…, bin aber noch am Anfang", "…, llevo dos meses"), a dash, a bracket.
_CUT = re.compile(r"\s*[,;:()\[\]]\s*|\s+[-–—]+\s+")
_WORD = re.compile(r"\w+", re.UNICODE)


def _clause(text: str) -> str:
    m = _CUT.search(text)
    text = (text[: m.start()] if m else text).strip(" ,.!¡")
    # "… und lese Griechisch", "… и изучаю папирусы": a second verb of the
    # author's starts a clause of its own
    words = text.split()
    for i in range(1, len(words) - 1):
        if words[i].lower() in ("und", "y", "et", "и") and words[i + 1].lower() in _FIRST_VERBS:
            return " ".join(words[:i])
    return text


def _enough(rest: str) -> bool:
    return any(len(w) >= 4 for w in _WORD.findall(rest))


# -- German --------------------------------------------------------------------------------------

_DE_VERBS = {
    "bin": "ist", "habe": "hat", "hab": "hat", "arbeite": "arbeitet", "wohne": "wohnt",
    "lebe": "lebt", "komme": "kommt", "studiere": "studiert", "spreche": "spricht",
    "lese": "liest", "schreibe": "schreibt", "lerne": "lernt", "liebe": "liebt", "mag": "mag",
    "spiele": "spielt", "sammle": "sammelt", "unterrichte": "unterrichtet", "forsche": "forscht",
    "interessiere": "interessiert", "beschäftige": "beschäftigt", "male": "malt",
    "koche": "kocht", "programmiere": "programmiert", "übersetze": "übersetzt",
    "entwickle": "entwickelt", "mache": "macht", "war": "war", "hatte": "hatte",
    "esse": "isst", "fahre": "fährt", "trage": "trägt", "laufe": "läuft", "helfe": "hilft",
}  # fmt: skip
_DE_TALK = frozenset(
    "glaube denke meine weiß finde hoffe sehe frage verstehe vermute stimme würde könnte "
    "sollte möchte will muss werde kann darf wollte wünsche bitte danke schätze wette "
    "freue".split()
)
_DE_PASSING = frozenset(
    "müde froh glücklich traurig krank hungrig sicher gespannt da hier zurück fertig bereit "
    "gleich unsicher verwirrt begeistert dabei unterwegs weg online neugierig so sehr ganz "
    "echt total gerade jetzt heute noch mir nicht".split()
)
_DE_START = re.compile(
    r"^(?:(?:hallo|hi|ja|also|naja|übrigens|ach|oh|nun)\W+)*(?P<subj>ich|mein|meine)\s+(?P<rest>.+)",
    re.IGNORECASE,
)
_DE_MY = re.compile(r"\b[Mm]ein(?:e|en|em|er|es)?\b")


def _de_genitive(name: str) -> str:
    return f"{name}'" if name[-1:].lower() in ("s", "x", "z", "ß") else f"{name}s"


def _german(sentence: str, name: str) -> Said | None:
    m = _DE_START.match(sentence)
    if m is None:
        return None
    rest = _clause(m.group("rest"))
    words = rest.split()
    if not words:
        return None
    gen = _de_genitive(name)
    if m.group("subj").lower() != "ich":
        # "Meine Frau ist Ärztin" → "Annas Frau ist Ärztin"
        if len(words) < 3 or words[1].lower() not in ("ist", "sind", "war", "heißt"):
            return None
        return f"{gen} {_DE_MY.sub(gen, rest)}", "profile", "de.my"
    verb = words[0].lower()
    if verb in _DE_TALK:
        return None
    third = _DE_VERBS.get(verb)
    if third is None:
        if not (verb.endswith("e") and len(verb) > 4):
            return None
        stem = verb[:-1]
        third = stem + ("et" if stem.endswith(("t", "d")) else "t")
    tail = words[1:]
    if verb == "bin" and (not tail or tail[0].lower() in _DE_PASSING and tail[0] != "nicht"):
        return None
    if verb == "bin" and tail[0].lower() == "nicht" and (len(tail) < 2 or tail[1] in _DE_PASSING):
        return None
    said = " ".join(tail)
    if not _enough(said):
        return None
    said = _DE_MY.sub(gen, said)
    said = re.sub(r"\bmich\b|\bmir\b", "sich", said)
    return f"{name} {third} {said}", "profile" if verb == "bin" else "other", "de.ich"


# -- Spanish -------------------------------------------------------------------------------------

_ES_VERBS = {
    "soy": "es", "trabajo": "trabaja", "vivo": "vive", "estudio": "estudia", "hablo": "habla",
    "leo": "lee", "escribo": "escribe", "enseño": "enseña", "juego": "juega", "toco": "toca",
    "colecciono": "colecciona", "aprendo": "aprende", "investigo": "investiga",
    "programo": "programa", "cocino": "cocina", "pinto": "pinta", "corro": "corre",
    "tengo": "tiene", "vengo": "viene", "hago": "hace", "amo": "ama", "odio": "odia",
    "prefiero": "prefiere", "traduzco": "traduce", "dirijo": "dirige", "colaboro": "colabora",
    "nací": "nació", "crecí": "creció", "estudié": "estudió", "trabajé": "trabajó",
    "viví": "vivió", "soy de": "es de", "me dedico": "se dedica", "me llamo": "se llama",
    "estoy": "está", "fui": "fue", "era": "era",
}  # fmt: skip
_ES_LIKE = {"me gusta": "le gusta", "me gustan": "le gustan", "me encanta": "le encanta",
            "me encantan": "le encantan", "me interesa": "le interesa",
            "me interesan": "le interesan"}  # fmt: skip
_ES_START = re.compile(
    r"^(?:(?:hola|sí|si|bueno|pues|además|también|ahora|actualmente)\W+)*(?:yo\s+)?"
    r"(?P<neg>no\s+)?(?P<verb>me\s+\w+|\w+)\s+(?P<rest>.+)",
    re.IGNORECASE,
)
_ES_STATE_OK = re.compile(r"^(?:\w+(?:ando|iendo)|casad[oa]|jubilad[oa]|divorciad[oa])\b", re.I)


def _spanish(sentence: str, name: str) -> Said | None:
    if sentence.lstrip().startswith("¿"):
        return None
    m = _ES_START.match(sentence)
    if m is None:
        return None
    verb = re.sub(r"\s+", " ", m.group("verb").lower())
    rest = _clause(m.group("rest"))
    neg = "no " if m.group("neg") else ""
    if verb in _ES_LIKE:
        if not _enough(rest):
            return None
        return f"A {name} {neg}{_ES_LIKE[verb]} {_es_rest(rest)}", "preference", "es.gusta"
    third = _ES_VERBS.get(verb)
    if third is None or not _enough(rest):
        return None
    if verb == "estoy" and not _ES_STATE_OK.match(rest):
        return None  # "estoy cansada": a moment
    return f"{name} {neg}{third} {_es_rest(rest)}", "other", "es.yo"


def _es_rest(rest: str) -> str:
    rest = re.sub(r"\bmis\b", "sus", rest, flags=re.IGNORECASE)
    return re.sub(r"\bmi\b", "su", rest, flags=re.IGNORECASE)


# -- French --------------------------------------------------------------------------------------

_FR_VERBS = {
    "suis": "est", "ai": "a", "vais": "va", "fais": "fait", "lis": "lit", "écris": "écrit",
    "vis": "vit", "viens": "vient", "prends": "prend", "apprends": "apprend",
    "enseigne": "enseigne", "étais": "était", "avais": "avait", "suis né": "est né",
    "suis née": "est née",
}  # fmt: skip
_FR_TALK = frozenset(
    "pense crois trouve espère vois comprends sais connais peux veux voudrais pourrais "
    "devrais dois suppose imagine demande dis remercie propose".split()
)
_FR_PASSING = frozenset(
    "fatigué fatiguée content contente désolé désolée sûr sûre prêt prête là ici ravi ravie "
    "heureux heureuse malade occupé occupée d'accord curieux curieuse en".split()
)
_FR_START = re.compile(
    r"^(?:(?:salut|bonjour|oui|alors|bon|aussi|moi)\W+)*(?:je\s+|j')(?P<neg>ne\s+|n')?"
    r"(?P<verb>\w+)\s+(?P<rest>.+)",
    re.IGNORECASE,
)


def _french(sentence: str, name: str) -> Said | None:
    m = _FR_START.match(sentence.replace("’", "'"))
    if m is None:
        return None
    verb = m.group("verb").lower()
    if verb in _FR_TALK:
        return None
    third = _FR_VERBS.get(verb)
    if third is None:
        if verb.endswith("e") and len(verb) > 3:
            third = verb  # "je travaille" → "travaille": the same form
        elif verb.endswith("is") and len(verb) > 4:
            third = verb[:-1] + "t"  # "je finis" → "finit"
        else:
            return None
    rest = _clause(m.group("rest"))
    words = rest.split()
    if not words or not _enough(rest):
        return None
    if verb == "suis" and words[0].lower() in _FR_PASSING and not m.group("neg"):
        return None
    neg = ""
    if m.group("neg"):
        neg = "n'" if third[0] in "aeéiou" else "ne "
    rest = re.sub(r"\bmes\b", "ses", re.sub(r"\bma\b", "sa", re.sub(r"\bmon\b", "son", rest)))
    return f"{name} {neg}{third} {rest}", "profile" if verb == "suis" else "other", "fr.je"


# -- Russian -------------------------------------------------------------------------------------

_RU_VERBS = {
    "работаю": "работает", "живу": "живёт", "учусь": "учится", "изучаю": "изучает",
    "говорю": "говорит", "читаю": "читает", "пишу": "пишет", "люблю": "любит",
    "занимаюсь": "занимается", "играю": "играет", "преподаю": "преподаёт",
    "исследую": "исследует", "собираю": "собирает", "интересуюсь": "интересуется",
    "увлекаюсь": "увлекается", "перевожу": "переводит", "рисую": "рисует",
    "готовлю": "готовит", "программирую": "программирует", "учу": "учит",
    "владею": "владеет", "руковожу": "руководит", "хожу": "ходит", "бегаю": "бегает",
    "плаваю": "плавает", "пою": "поёт", "вожу": "водит", "служу": "служит",
}  # fmt: skip
_RU_TALK = frozenset(
    "думаю знаю считаю хочу могу надеюсь помню вижу понимаю полагаю согласен согласна "
    "уверен уверена боюсь предлагаю спрашиваю смотрю слышу жду рад рада устал устала "
    "сейчас тоже просто".split()
)
_RU_ROLES = re.compile(
    r"^(?:\w+\s+)?(?:программист|разработчик|учитель|учительница|студент|студентка|инженер|"
    r"врач|историк|филолог|лингвист|переводчик|переводчица|исследователь|исследовательница|"
    r"папиролог|палеограф|художник|художница|музыкант|писатель|писательница|аспирант|"
    r"аспирантка|преподаватель|преподавательница|археолог|учёный|ученый|дизайнер|журналист|"
    r"журналистка|библиотекарь|математик|физик|химик|биолог|юрист|архитектор)\w*\b",
    re.IGNORECASE,
)
_RU_START = re.compile(
    r"^(?:(?:привет|да|ну|кстати|вообще|а|вот)\W+)*я\s+(?:[—-]\s+)?(?P<neg>не\s+)?"
    r"(?P<rest>.+)",
    re.IGNORECASE,
)
_RU_MY = {"мой": "свой", "моя": "своя", "мою": "свою", "моей": "своей", "моё": "своё",
          "мое": "свое", "мои": "свои", "моих": "своих", "моим": "своим", "моего": "своего",
          "моему": "своему", "моими": "своими"}  # fmt: skip


def _russian(sentence: str, name: str) -> Said | None:
    m = _RU_START.match(sentence)
    if m is None or "бы" in sentence.lower().split():
        return None
    rest = _clause(m.group("rest"))
    neg = "не " if m.group("neg") else ""
    words = rest.split()
    if not words:
        return None
    first = words[0].lower()
    if first in _RU_TALK:
        return None
    tail = " ".join(_RU_MY.get(w.lower(), w) for w in words[1:])
    third = _RU_VERBS.get(first) or _ru_third(first)
    if third is None:
        if _RU_ROLES.match(rest):
            return f"{name} — {neg}{_ru_rest(rest)}", "profile", "ru.role"
        return None
    if not _enough(tail):
        return None
    return f"{name} {neg}{third} {tail}", "other", "ru.ya"


def _ru_rest(rest: str) -> str:
    return " ".join(_RU_MY.get(w.lower(), w) for w in rest.split())


def _ru_third(verb: str) -> str | None:
    """Regular first-conjugation and past forms: "изучаю" → "изучает",
    "работал" → "работал" (the past does not change with the person)."""
    if re.search(r"(?:л|ла|лся|лась)$", verb) and len(verb) > 4:
        return verb
    for one, three in (("аюсь", "ается"), ("уюсь", "уется"), ("аю", "ает"), ("яю", "яет"),
                       ("ую", "ует")):  # fmt: skip
        if verb.endswith(one) and len(verb) > len(one) + 2:
            return verb[: -len(one)] + three
    return None


# -- Japanese ------------------------------------------------------------------------------------

_JA_START = re.compile(r"^(?:私|わたし|僕|ぼく|俺|おれ|あたし|自分)(?P<p>は|も|が)(?P<rest>.+)$")
_JA_END = re.compile(r"(?:です|ます|ました|でした|ません|ではない|じゃない|だ|ている|てる|ない)$")
_JA_REFUSE = re.compile(
    r"思う|思い|思っ|かな|たい|たら|なら|れば|でしょう|だろう|かも|疲れ|眠い|空いた|今日|今は|"
    r"ください|下さい|ましょう|よう[にと]"
)
_JA_MY = re.compile(r"(?:私|わたし|僕|ぼく|俺|おれ|あたし|自分)の")


# Japanese drops the subject: "銀行でプログラマーとして働いて三年になります" is the
# speaker's own. Only with a verb of a life (work, live, study, teach, keep
# a pet, play an instrument) is it read as theirs.
_JA_LIFE = re.compile(
    r"働い|住ん|勉強し|研究し|教えて|習って|学んで|通って|飼って|弾いて|集めて|専攻"
)


def _japanese(sentence: str, name: str) -> Said | None:
    text = sentence.strip().rstrip("。．.!！")
    if _JA_REFUSE.search(text) or text.endswith(("か", "の")):
        return None
    m = _JA_START.match(text)
    if m is None:
        if _JA_LIFE.search(text) and _JA_END.search(text) and "、" not in text:
            return f"{name}は{_JA_MY.sub(name + 'の', text)}", "other", "ja.implied"
        return None
    rest = m.group("rest")
    if not _JA_END.search(rest) or len(rest) < 4:
        return None
    return f"{name}{m.group('p')}{_JA_MY.sub(name + 'の', rest)}", "other", "ja.watashi"


_FIRST_VERBS = (
    frozenset(_DE_VERBS) | frozenset(_ES_VERBS) | frozenset(_FR_VERBS) | frozenset(_RU_VERBS)
)


# -- all of them ---------------------------------------------------------------------------------

_LANGUAGES: tuple[Callable[[str, str], Said | None], ...] = (
    _german,
    _spanish,
    _french,
    _russian,
    _japanese,
)
_QUESTION = re.compile(r"[?？¿]")
_CONDITION = re.compile(
    r"^\W*(?:wenn|falls|ob|si|cuando|quand|если|когда|もし)\b|\b(?:würde|könnte|podría|"
    r"pourrais|voudrais|бы)\b",
    re.IGNORECASE,
)
JA_SENTENCE = re.compile(r"(?<=[。！？])")


# English words that none of these languages uses: a sentence holding one is
# English ("Leo is my cat" is not Spanish for "I read").
_ENGLISH = re.compile(
    r"\b(?:the|is|are|and|of|my|you|it|to|with|for|that|this|i|i'm|he|she|they|have|has)\b",
    re.IGNORECASE,
)


def other_languages(sentence: str, name: str) -> list[Said]:
    """The statement a sentence in one of the other languages makes, if any."""
    if _QUESTION.search(sentence) or _CONDITION.search(sentence) or _ENGLISH.search(sentence):
        return []
    for read in _LANGUAGES:
        said = read(sentence, name)
        if said is not None:
            return [said]
    return []

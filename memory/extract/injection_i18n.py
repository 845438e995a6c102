"""Injection and secret phrases in German, Spanish, Russian and Japanese.

``memory.extract.injection`` knows English. A guild that talks in another
language can carry the same attack in its own words ("Ignoriere alle
vorherigen Anweisungen", "Игнорируй все предыдущие инструкции", "以前の指示を
無視して"), so these patterns run beside the English ones, on the same
lower-cased, de-obfuscated forms (``match_forms``).

Only phrases are rejected here, never single words: "Anweisung" (a bank
transfer order), "regla" (a ruler) and "правило" (any rule) are everyday
words, and a fact store of a German guild must keep "Lena hat die
Anweisung der Bank unterschrieben". What is rejected is a word for dropping
(ignore, forget, disregard) near a word for the rules, a persona switch
addressed to the reader ("ab jetzt bist du…"), a request to show the
instructions, an "always/never answer" imperative, and the words for a
password or PIN.

Japanese has no spaces, so its patterns are plain substrings; the other
languages match on word boundaries.
"""

from __future__ import annotations

import re


def _any(*words: str) -> str:
    return "(?:" + "|".join(words) + ")"


# -- German ----------------------------------------------------------------------------------

_DE_RULES = _any(
    r"anweisungen", r"instruktionen", r"regeln", r"befehle", r"vorgaben", r"richtlinien",
    r"einschränkungen", r"systemprompt", r"prompt",
)  # fmt: skip
# Imperatives only: "Er ignoriert die Regeln" describes him.
_DE_DROP = _any(r"ignorier", r"ignoriere", r"vergiss", r"vergesst", r"missachte", r"umgehe")
_DE = (
    rf"\b{_DE_DROP}\b(?:\W+\w+){{0,4}}?\W+{_DE_RULES}\b"
    r"|\bab\s+(?:jetzt|sofort|nun)\s+(?:bist|antwortest|sollst|musst|wirst)\s+du\b"
    r"|\bdu\s+bist\s+(?:jetzt|nun|ab\s+sofort|ab\s+jetzt)\s+(?:ein|eine|kein|keine|der|die|das)\b"
    r"|\bdu\s+hast\s+keine\s+(?:regeln|einschränkungen)\b"
    rf"|\b(?:zeig|zeige|gib|nenne|verrate|wiederhole)\b(?:\W+\w+){{0,3}}?\W+"
    rf"(?:deine|ihre|die)\s+(?:\w+\s+)?{_DE_RULES}\b"
    r"|\bsystem-?prompts?\b"
)

# -- Spanish ---------------------------------------------------------------------------------

_ES_RULES = _any(
    r"instrucciones", r"reglas", r"órdenes", r"ordenes", r"indicaciones", r"directrices",
    r"restricciones", r"prompt",
)  # fmt: skip
# "ignora" and "olvida" are also the third person ("Ana ignora las reglas del
# juego"), so the rules must be the reader's, all of them, or the earlier ones.
_ES_DROP = _any(r"ignora", r"ignore", r"ignoren", r"olvida", r"olvide", r"olviden", r"omite")
_ES = (
    rf"\b{_ES_DROP}\s+(?:todas\s+)?(?:tus|sus)\s+(?:\w+\s+)?{_ES_RULES}\b"
    rf"|\b{_ES_DROP}\s+(?:todas?|todo)\b(?:\W+\w+){{0,3}}?\W+{_ES_RULES}\b"
    rf"|\b{_ES_DROP}\b(?:\W+\w+){{0,3}}?\W+{_ES_RULES}\s+(?:anteriores|previas|de\s+arriba)\b"
    r"|\ba\s+partir\s+de\s+ahora\s+(?:eres|serás|seras|vas\s+a|debes|responde|responderás)\b"
    r"|\bahora\s+eres\s+(?:un|una|el|la)\b"
    r"|\bno\s+tienes\s+(?:reglas|restricciones)\b"
    rf"|\b(?:muestra|muéstrame|revela|dime|repite|enseña)\b(?:\W+\w+){{0,3}}?\W+"
    rf"(?:tus|sus|las)\s+(?:\w+\s+)?{_ES_RULES}\b"
    r"|\bprompt\s+del\s+sistema\b"
)

# -- Russian ---------------------------------------------------------------------------------

_RU_RULES = r"(?:инструкци\w*|правил\w*|указани\w*|команд\w*|ограничени\w*|промпт\w*)"
_RU_DROP = r"(?:игнорируй\w*|забудь\w*|проигнорируй\w*|не\s+обращай\w*\s+внимания)"
_RU = (
    rf"\b{_RU_DROP}(?:\W+\w+){{0,4}}?\W+{_RU_RULES}"
    r"|\b(?:с\s+этого\s+момента|отныне)\s+ты\b"
    r"|\bтеперь\s+ты\s+(?:не\s+)?(?:\w+\s+)?(?:бот|ассистент|пират|персонаж)\w*"
    r"|\bу\s+тебя\s+нет\s+(?:правил|ограничений)"
    rf"|\b(?:покажи|выведи|раскрой|повтори|назови)\w*(?:\W+\w+){{0,3}}?\W+"
    rf"(?:сво[иё]\w*|тво[иё]\w*|системн\w*)\s+(?:\w+\s+)?{_RU_RULES}"
    r"|\bсистемн\w*\s+промпт\w*"
)

# -- Japanese (no spaces: substrings) ----------------------------------------------------------

_JA_RULES = r"(?:指示|命令|ルール|設定|制限|プロンプト)"
_JA = (
    rf"{_JA_RULES}.{{0,8}}?(?:無視|忘れ)"
    r"|(?:今から|これから|以後|今後)(?:は)?(?:あなた|君|きみ|お前|おまえ)は"
    rf"|{_JA_RULES}を(?:すべて|全て|全部)?(?:見せ|表示|教え|出力|開示)"
    r"|システムプロンプト"
)

OVERRIDE_I18N = re.compile("|".join((_DE, _ES, _RU, _JA)))

# Imperatives to always/never answer some way, addressed to the reader.
ALWAYS_NEVER_I18N = re.compile(
    r"\b(?:antworte|sag|sage|schreib|schreibe|erwähne)\s+(?:immer|nie|niemals)\b"
    r"|\b(?:responde|contesta|di|escribe|menciona)\s+(?:siempre|nunca)\b"
    r"|\b(?:siempre|nunca)\s+(?:responde|contesta|digas|escribas|menciones)\b"
    r"|\b(?:всегда|никогда\s+не)\s+(?:отвечай|говори|пиши|упоминай)\b"
    r"|(?:常に|いつも|絶対に).{0,10}?(?:答えて|返事して|返信して|言って|話して)"
)

# Words for a password, PIN or credentials. Russian nouns inflect, so stems.
SECRETS_I18N = re.compile(
    r"\b(?:passwort\w*|kennwort\w*|zugangsdaten|geheimzahl|pin-?code|pin-?nummer)\b"
    r"|\b(?:contraseñas?|contrasenas?|credenciales|clave\s+de\s+acceso|código\s+pin)\b"
    r"|\b(?:парол\w*|пин-?код\w*|учётн\w*\s+данн\w*|учетн\w*\s+данн\w*)"
    r"|パスワード|暗証番号|ログイン情報"
)

"""Date expressions in a text ("last week", "in 2022") resolved to periods (first day, last day,
granularity) against a reference date; pure functions shared by stored turns and question windows."""

import calendar
import re
from contextlib import suppress
from dataclasses import dataclass
from datetime import date, datetime, timedelta

DAY, WEEK, MONTH, YEAR = "day", "week", "month", "year"

WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
MONTHS = tuple("january february march april may june july august september october november december".split())
_COUNTS = "one two three four five six seven eight nine ten eleven twelve".split()
NUMBER_WORDS = {"a": 1, "an": 1, "a couple of": 2, "couple of": 2} | {word: n for n, word in enumerate(_COUNTS, 1)}


@dataclass(frozen=True)
class ResolvedDate:
    expression: str  # the words as they appear in the text
    start: date
    end: date
    granularity: str

    def as_metadata(self) -> dict:
        return {
            "resolved_date": self.start.isoformat(),
            "date_end": self.end.isoformat(),
            "date_granularity": self.granularity,
            "date_expression": self.expression,
        }

    def describe(self) -> str:
        return describe_period(self.start, self.granularity)


def describe_period(start: date, granularity: str) -> str:
    if granularity == YEAR:
        return str(start.year)
    if granularity == MONTH:
        return f"{MONTHS[start.month - 1].title()} {start.year}"
    day = f"{start.day} {MONTHS[start.month - 1].title()} {start.year}"
    return f"the week of {day}" if granularity == WEEK else day


# Periods -----------------------------------------------------------------------------------


def add_months(day: date, months: int) -> date:
    """Clamped to the end of a shorter month."""
    index = day.year * 12 + day.month - 1 + months
    year, month = divmod(index, 12)
    return date(year, month + 1, min(day.day, calendar.monthrange(year, month + 1)[1]))


def day_period(day: date) -> tuple[date, date, str]:
    return day, day, DAY


def week_period(day: date) -> tuple[date, date, str]:
    monday = day - timedelta(days=day.weekday())
    return monday, monday + timedelta(days=6), WEEK


def month_period(day: date) -> tuple[date, date, str]:
    first = day.replace(day=1)
    return first, first.replace(day=calendar.monthrange(day.year, day.month)[1]), MONTH


def year_period(day: date) -> tuple[date, date, str]:
    return date(day.year, 1, 1), date(day.year, 12, 31), YEAR


def weekend_period(saturday: date) -> tuple[date, date, str]:
    """Two days, reported with week granularity (a weekend is part of one week)."""
    return saturday, saturday + timedelta(days=1), WEEK


def shifted(reference: date, unit: str, amount: int) -> tuple[date, date, str]:
    if unit == DAY:
        return day_period(reference + timedelta(days=amount))
    if unit == WEEK:
        return week_period(reference + timedelta(weeks=amount))
    if unit == MONTH:
        return month_period(add_months(reference, amount))
    return year_period(date(reference.year + amount, 1, 1))


# Rules -------------------------------------------------------------------------------------
# Each rule is (pattern, resolver(match, reference date) -> period or None). Matches are
# case-insensitive and on word boundaries; where two overlap, the earlier and then the longer wins.

_NUMBER = (
    r"(?P<number>\d{1,3}|a couple of|couple of|an?|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve)"
)
_UNIT = r"(?P<unit>day|week|month|year)s?"
_WEEKDAY = r"(?P<weekday>" + "|".join(WEEKDAYS) + r")"
_MONTH = r"(?P<month>" + "|".join(MONTHS) + r")"
_PART_OF_DAY = r"(?:morning|afternoon|evening|night)"


def _number(match) -> int:
    text = " ".join(match.group("number").lower().split())
    return int(text) if text.isdigit() else NUMBER_WORDS[text]


def _units(sign: int):
    """`sign` times the number of units named, or one unit when the rule names no number ("last week")."""

    def resolve(match, reference: date):
        count = _number(match) if "number" in match.re.groupindex else 1
        return shifted(reference, match.group("unit").lower(), sign * count)

    return resolve


def _nearest_weekday(direction: int):
    """The weekday named, strictly before (-1) or after (1) the reference day."""

    def resolve(match, reference: date):
        target = WEEKDAYS.index(match.group("weekday").lower())
        days = (direction * (target - reference.weekday())) % 7 or 7
        return day_period(reference + timedelta(days=direction * days))

    return resolve


def _this_weekday(match, reference: date):
    target = WEEKDAYS.index(match.group("weekday").lower())
    return day_period(reference + timedelta(days=target - reference.weekday()))


def _saturday_of_week(reference: date) -> date:
    return reference - timedelta(days=reference.weekday()) + timedelta(days=5)


def _weekend(weeks: int):
    """The weekend of the week `weeks` from the reference's ("last weekend" on a Monday: two days ago)."""

    def resolve(match, reference: date):
        return weekend_period(_saturday_of_week(reference) + timedelta(weeks=weeks))

    return resolve


def _past_weekend(match, reference: date):
    """ "over the weekend": the weekend we are in, or else the most recent one."""
    saturday = _saturday_of_week(reference)
    return weekend_period(saturday if reference >= saturday else saturday - timedelta(days=7))


def _month_name(direction: int):
    """ "last May" / "next May": the nearest May strictly before / after the reference month."""

    def resolve(match, reference: date):
        name = match.group("month")
        if name == "may":  # lower-case, the verb: "the last may be..."
            return None
        month = MONTHS.index(name.lower()) + 1
        this_year = (month - reference.month) * direction > 0
        return month_period(date(reference.year if this_year else reference.year + direction, month, 1))

    return resolve


def _fixed_days(offset: int):
    def resolve(match, reference: date):
        return day_period(reference + timedelta(days=offset))

    return resolve


RULES = [
    (r"the day before yesterday", _fixed_days(-2)),
    (r"the day after tomorrow", _fixed_days(2)),
    (r"(?:yesterday(?: " + _PART_OF_DAY + r")?|last night)", _fixed_days(-1)),
    (r"tomorrow(?: " + _PART_OF_DAY + r")?", _fixed_days(1)),
    (r"(?:(?:earlier |later )?today|tonight|this " + _PART_OF_DAY + r")", _fixed_days(0)),
    (_NUMBER + r" " + _UNIT + r" ago", _units(-1)),
    (r"(?:in|within) " + _NUMBER + r" " + _UNIT, _units(1)),
    (_NUMBER + r" " + _UNIT + r" (?:from now|later on|from today)", _units(1)),
    (r"(?:last|previous|the previous|the last) " + _UNIT.replace("s?", ""), _units(-1)),
    (r"(?:earlier |later )?this " + _UNIT.replace("s?", ""), _units(0)),
    (r"(?:next|the next|the following|the coming|the upcoming) " + _UNIT.replace("s?", ""), _units(1)),
    (r"(?:last|this past|the past|this last) " + _WEEKDAY, _nearest_weekday(-1)),
    (r"(?:next|the coming|this coming) " + _WEEKDAY, _nearest_weekday(1)),
    (r"this " + _WEEKDAY, _this_weekday),
    (r"(?:last|this past|the past) weekend", _weekend(-1)),
    (r"this weekend", _weekend(0)),
    (r"(?:next|the coming|this coming) weekend", _weekend(1)),
    (r"over the weekend", _past_weekend),
    (r"last " + _MONTH, _month_name(-1)),
    (r"next " + _MONTH, _month_name(1)),
]


def _compiled(rules):
    return [(re.compile(r"(?<![\w-])" + pattern + r"(?![\w-])", re.IGNORECASE), resolve) for pattern, resolve in rules]


_COMPILED = _compiled(RULES)


# Dates named outright. A year is 1900-2099 and needs a preposition or a month beside it ("in 2022",
# "May 2022"), so that "2022 people" or a room number is not a date; a month alone needs a
# preposition too ("in June", "of November"); beside a day, a year or a preposition "may" is the month.
_YEAR = r"(?P<year>(?:19|20)\d\d)"
_DAY = r"(?P<day>[0-3]?\d)(?:st|nd|rd|th)?"
_MONTH_PREPOSITION = r"(?:in|of|during|since|until|through|from|by|early|late|mid|mid-)"


def _nearest_year(reference: date, month: int, day: int = 1) -> int:
    """The year that puts month/day nearest to the reference date (the past on a tie)."""
    candidates = []
    for year in (reference.year - 1, reference.year, reference.year + 1):
        with suppress(ValueError):
            candidates.append((abs((date(year, month, min(day, 28 if month == 2 else day)) - reference).days), -year))
    return -min(candidates)[1]


def _named_day(match, reference: date):
    month = MONTHS.index(match.group("month").lower()) + 1
    day = int(match.group("day"))
    year = int(match.group("year")) if match.group("year") else _nearest_year(reference, month, day)
    if not 1 <= day <= calendar.monthrange(year, month)[1]:
        return None
    return day_period(date(year, month, day))


def _named_month(match, reference: date):
    month = MONTHS.index(match.group("month").lower()) + 1
    year = int(match.group("year")) if match.groupdict().get("year") else _nearest_year(reference, month)
    return month_period(date(year, month, 1))


def _named_year(match, reference: date):
    return year_period(date(int(match.group("year")), 1, 1))


ABSOLUTE_RULES = [
    (_MONTH + r"\.? " + _DAY + r"(?:,? " + _YEAR + r")?", _named_day),
    (_DAY + r" (?:of )?" + _MONTH + r"(?:,? " + _YEAR + r")?", _named_day),
    (_MONTH + r",? " + _YEAR, _named_month),
    (
        _MONTH_PREPOSITION
        + r" (?:the (?:beginning|start|end|middle) of )?"
        + _MONTH
        + r"(?:,? "
        + _YEAR
        + r")?(?!\.? [0-3]?\d(?:st|nd|rd|th)?(?!\w))",
        _named_month,
    ),
    (r"(?:in|of|during|since|until|through|from|by|year|early|late|mid|mid-) " + _YEAR, _named_year),
]
_ABSOLUTE_COMPILED = _compiled(ABSOLUTE_RULES)


def resolve_dates(text: str, reference: date | datetime) -> list[ResolvedDate]:
    """Every relative date expression in `text`, in reading order; a datetime reference is read on its
    own calendar day (convert it to the speaker's time zone first when that is known)."""
    return _resolve(_COMPILED, text, reference)


def find_dates(text: str, reference: date | datetime) -> list[ResolvedDate]:
    """Every date expression in `text`, relative or named outright ("in 2022", "3 May 2023", "in
    June": a month or day without a year is the nearest one to `reference`), in reading order."""
    return _resolve(_COMPILED + _ABSOLUTE_COMPILED, text, reference)


def span_of(dates: list[ResolvedDate]) -> tuple[date, date] | None:
    if not dates:
        return None
    return min(item.start for item in dates), max(item.end for item in dates)


def _resolve(rules, text: str, reference: date | datetime) -> list[ResolvedDate]:
    if isinstance(reference, datetime):
        reference = reference.date()
    found = []
    for pattern, resolve in rules:
        for match in pattern.finditer(text or ""):
            period = resolve(match, reference)
            if period is not None:
                found.append((match.start(), match.end(), match.group(0), period))
    found.sort(key=lambda item: (item[0], -(item[1] - item[0])))
    results, covered_until = [], -1
    for start, end, expression, (first, last, granularity) in found:
        if start < covered_until:
            continue  # inside a longer expression already taken ("the day before yesterday")
        results.append(ResolvedDate(expression=expression, start=first, end=last, granularity=granularity))
        covered_until = end
    return results


def query_window(text: str, reference: date | datetime) -> ResolvedDate | None:
    """The period a question asks about ("what did she do last May?", "in 2022"): every date
    expression in it taken together, or None when it names none. `reference` is the asker's now."""
    dates = find_dates(text, reference)
    if not dates:
        return None
    start, end = span_of(dates)
    granularity = dates[0].granularity if len(dates) == 1 else DAY
    return ResolvedDate(
        expression="; ".join(item.expression for item in dates), start=start, end=end, granularity=granularity
    )

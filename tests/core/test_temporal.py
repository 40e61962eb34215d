"""The temporal normaliser: relative expressions resolved to absolute periods against the turn's date."""

from datetime import date, datetime, timedelta, timezone

import pytest

from apps.core.temporal import add_months, describe_period, find_dates, query_window, resolve_dates, span_of

MONDAY = date(2023, 5, 8)  # LOCOMO conv-26 session 1: "1:56 pm on 8 May, 2023"


def only(text, reference=MONDAY):
    (resolved,) = resolve_dates(text, reference)
    return resolved.start.isoformat(), resolved.end.isoformat(), resolved.granularity


@pytest.mark.parametrize(
    "text,expected",
    [
        ("I went to a support group yesterday.", ("2023-05-07", "2023-05-07", "day")),
        ("Yesterday morning was rough", ("2023-05-07", "2023-05-07", "day")),
        ("We talked last night", ("2023-05-07", "2023-05-07", "day")),
        ("the day before yesterday", ("2023-05-06", "2023-05-06", "day")),
        ("I ran this morning", ("2023-05-08", "2023-05-08", "day")),
        ("Earlier today I painted", ("2023-05-08", "2023-05-08", "day")),
        ("see you tonight", ("2023-05-08", "2023-05-08", "day")),
        ("tomorrow", ("2023-05-09", "2023-05-09", "day")),
        ("the day after tomorrow", ("2023-05-10", "2023-05-10", "day")),
        ("two days ago", ("2023-05-06", "2023-05-06", "day")),
        ("3 days ago", ("2023-05-05", "2023-05-05", "day")),
        ("a couple of days ago", ("2023-05-06", "2023-05-06", "day")),
        ("a week ago", ("2023-05-01", "2023-05-07", "week")),
        ("two weeks ago", ("2023-04-24", "2023-04-30", "week")),
        ("last week", ("2023-05-01", "2023-05-07", "week")),
        ("the previous week", ("2023-05-01", "2023-05-07", "week")),
        ("earlier this week", ("2023-05-08", "2023-05-14", "week")),
        ("next week", ("2023-05-15", "2023-05-21", "week")),
        ("in 2 weeks", ("2023-05-22", "2023-05-28", "week")),
        ("in two days", ("2023-05-10", "2023-05-10", "day")),
        ("three days from now", ("2023-05-11", "2023-05-11", "day")),
        ("last month", ("2023-04-01", "2023-04-30", "month")),
        ("this month", ("2023-05-01", "2023-05-31", "month")),
        ("next month", ("2023-06-01", "2023-06-30", "month")),
        ("a month ago", ("2023-04-01", "2023-04-30", "month")),
        ("six months ago", ("2022-11-01", "2022-11-30", "month")),
        ("last year", ("2022-01-01", "2022-12-31", "year")),
        ("this year", ("2023-01-01", "2023-12-31", "year")),
        ("next year", ("2024-01-01", "2024-12-31", "year")),
        ("10 years ago", ("2013-01-01", "2013-12-31", "year")),
        ("last Saturday", ("2023-05-06", "2023-05-06", "day")),
        ("last Monday", ("2023-05-01", "2023-05-01", "day")),  # said on a Monday: a week ago, not today
        ("this past Friday", ("2023-05-05", "2023-05-05", "day")),
        ("next Friday", ("2023-05-12", "2023-05-12", "day")),
        ("this Friday", ("2023-05-12", "2023-05-12", "day")),
        ("last weekend", ("2023-05-06", "2023-05-07", "week")),
        ("over the weekend", ("2023-05-06", "2023-05-07", "week")),
        ("this weekend", ("2023-05-13", "2023-05-14", "week")),
        ("next weekend", ("2023-05-20", "2023-05-21", "week")),
        ("last May", ("2022-05-01", "2022-05-31", "month")),
        ("last March", ("2023-03-01", "2023-03-31", "month")),
        ("next June", ("2023-06-01", "2023-06-30", "month")),
        ("next April", ("2024-04-01", "2024-04-30", "month")),
        ("LAST WEEK", ("2023-05-01", "2023-05-07", "week")),
    ],
)
def test_expressions_resolve_against_the_reference_day(text, expected):
    assert only(text) == expected


@pytest.mark.parametrize(
    "text,reference,expected",
    [
        # Year boundaries.
        ("last week", date(2024, 1, 3), ("2023-12-25", "2023-12-31", "week")),
        ("last month", date(2024, 1, 15), ("2023-12-01", "2023-12-31", "month")),
        ("next month", date(2023, 12, 31), ("2024-01-01", "2024-01-31", "month")),
        ("yesterday", date(2024, 1, 1), ("2023-12-31", "2023-12-31", "day")),
        # Month lengths: a month before 31 March is February, clamped.
        ("a month ago", date(2023, 3, 31), ("2023-02-01", "2023-02-28", "month")),
        ("in 1 month", date(2024, 1, 31), ("2024-02-01", "2024-02-29", "month")),
        # Weekends said during a weekend.
        ("over the weekend", date(2023, 5, 7), ("2023-05-06", "2023-05-07", "week")),
        ("last weekend", date(2023, 5, 7), ("2023-04-29", "2023-04-30", "week")),
        ("this weekend", date(2023, 5, 6), ("2023-05-06", "2023-05-07", "week")),
        # Weekdays around the reference.
        ("next Friday", date(2023, 5, 11), ("2023-05-12", "2023-05-12", "day")),
        ("last Friday", date(2023, 5, 12), ("2023-05-05", "2023-05-05", "day")),
        ("last May", date(2023, 6, 1), ("2023-05-01", "2023-05-31", "month")),
    ],
)
def test_edges_of_weeks_months_and_years(text, reference, expected):
    assert only(text, reference) == expected


def test_several_expressions_come_back_in_reading_order_with_their_words():
    resolved = resolve_dates("Last week I moved, and two days ago I started a job; next month I travel.", MONDAY)
    assert [(item.expression, item.start.isoformat()) for item in resolved] == [
        ("Last week", "2023-05-01"),
        ("two days ago", "2023-05-06"),
        ("next month", "2023-06-01"),
    ]


def test_the_longest_expression_wins_where_two_overlap():
    assert [item.expression for item in resolve_dates("the day before yesterday", MONDAY)] == [
        "the day before yesterday"
    ]
    assert [item.expression for item in resolve_dates("a couple of weeks ago", MONDAY)] == ["a couple of weeks ago"]


@pytest.mark.parametrize(
    "text",
    [
        "",
        "I love painting sunsets.",
        "On 7 May 2023 I went to a support group.",  # already absolute
        "The paint may last, may it not?",  # the verb, not the month
        "It will last may be a year",
        "yesterdays are gone",  # not the word on its own
        "a few days ago",  # vague: not resolved rather than guessed
        "one day I will travel",
        "pre-yesterday",
    ],
)
def test_text_without_a_resolvable_relative_date_gives_nothing(text):
    assert resolve_dates(text, MONDAY) == []


def test_a_datetime_reference_is_read_on_its_own_calendar_day():
    late_evening = datetime(2023, 5, 8, 23, 30, tzinfo=timezone(timedelta(hours=-5)))  # 9 May in UTC
    assert only("yesterday", late_evening)[0] == "2023-05-07"
    assert only("yesterday", late_evening.astimezone(timezone.utc))[0] == "2023-05-08"


def test_metadata_and_words_of_a_resolution():
    (resolved,) = resolve_dates("I went there last week", MONDAY)
    assert resolved.as_metadata() == {
        "resolved_date": "2023-05-01",
        "date_end": "2023-05-07",
        "date_granularity": "week",
        "date_expression": "last week",
    }
    assert resolved.describe() == "the week of 1 May 2023"
    assert describe_period(date(2023, 5, 7), "day") == "7 May 2023"
    assert describe_period(date(2023, 4, 1), "month") == "April 2023"
    assert describe_period(date(2022, 1, 1), "year") == "2022"


def test_add_months_clamps_to_the_end_of_shorter_months():
    assert add_months(date(2023, 1, 31), 1) == date(2023, 2, 28)
    assert add_months(date(2024, 1, 31), 1) == date(2024, 2, 29)
    assert add_months(date(2023, 3, 15), -15) == date(2021, 12, 15)


# Dates named outright, and a question's window -----------------------------------------------


@pytest.mark.parametrize(
    "text, reference, expected",
    [
        ("in 2022", MONDAY, ("2022-01-01", "2022-12-31", "year")),
        ("since 2018", MONDAY, ("2018-01-01", "2018-12-31", "year")),
        ("May 3, 2023", MONDAY, ("2023-05-03", "2023-05-03", "day")),
        ("on 1 May, 2022", MONDAY, ("2022-05-01", "2022-05-01", "day")),
        ("the 14th of August 2023", MONDAY, ("2023-08-14", "2023-08-14", "day")),
        ("in January 2022", MONDAY, ("2022-01-01", "2022-01-31", "month")),
        ("in the beginning of November 2022", MONDAY, ("2022-11-01", "2022-11-30", "month")),
        # A month or day without a year: the nearest one to the reference.
        ("in June", MONDAY, ("2023-06-01", "2023-06-30", "month")),
        ("in December", MONDAY, ("2022-12-01", "2022-12-31", "month")),
        ("on August 11", date(2023, 10, 20), ("2023-08-11", "2023-08-11", "day")),
    ],
)
def test_dates_named_outright_are_found_beside_relative_ones(text, reference, expected):
    (found,) = find_dates(text, reference)
    assert (found.start.isoformat(), found.end.isoformat(), found.granularity) == expected
    assert resolve_dates(text, reference) == []  # the turn's date line is for relative dates only


@pytest.mark.parametrize(
    "text",
    ["we were 2022 people", "It will last may be a year", "room 2022", "the 31 February 2023 is no day"],
)
def test_numbers_and_words_that_are_not_dates_give_no_named_date(text):
    assert [item for item in find_dates(text, MONDAY) if item.granularity == "day"] == []
    assert [item for item in find_dates(text, MONDAY) if item.granularity == "year"] == []


def test_a_question_window_spans_every_date_it_names():
    window = query_window("Where was John between August 11 and August 15 2023?", date(2023, 10, 20))
    assert (window.start.isoformat(), window.end.isoformat()) == ("2023-08-11", "2023-08-15")
    assert window.expression == "August 11; August 15 2023"
    last_may = query_window("What did she do last May?", date(2023, 10, 20))
    assert (last_may.start.isoformat(), last_may.end.isoformat(), last_may.granularity) == (
        "2023-05-01",
        "2023-05-31",
        "month",
    )
    assert query_window("What did she do?", MONDAY) is None
    assert span_of([]) is None

"""tierlog.jobs.cron: parsing by hand-worked examples, fire times against brute force."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tierlog.jobs import cron

MINUTE = timedelta(minutes=1)


# --- parsing ------------------------------------------------------------------------------


def test_fields_lists_ranges_steps_and_names() -> None:
    s = cron.parse("*/15 1-10/3,22 1,15 JAN-mar,dec mon-fri")
    assert s.minutes == (0, 15, 30, 45)
    assert s.hours == (1, 4, 7, 10, 22)
    assert s.days_of_month == (1, 15)
    assert s.months == (1, 2, 3, 12)
    assert s.days_of_week == (1, 2, 3, 4, 5)
    assert not s.dom_star and not s.dow_star


def test_star_covers_the_field_and_number_slash_step_runs_to_its_end() -> None:
    s = cron.parse("5/20 * * * *")
    assert s.minutes == (5, 25, 45)
    assert s.hours == tuple(range(24))
    assert s.days_of_month == tuple(range(1, 32))
    assert s.days_of_week == tuple(range(7))
    assert s.dom_star and s.dow_star


@pytest.mark.parametrize("sunday", ["0", "7", "sun", "SUN", "Sun"])
def test_sunday_is_0_or_7_or_its_name(sunday: str) -> None:
    assert cron.parse(f"0 0 * * {sunday}").days_of_week == (0,)


def test_a_range_ending_in_7_wraps_sunday_to_0() -> None:
    assert cron.parse("0 0 * * 5-7").days_of_week == (0, 5, 6)


@pytest.mark.parametrize(
    ("macro", "fields"),
    [
        ("@yearly", "0 0 1 1 *"),
        ("@annually", "0 0 1 1 *"),
        ("@monthly", "0 0 1 * *"),
        ("@weekly", "0 0 * * 0"),
        ("@daily", "0 0 * * *"),
        ("@midnight", "0 0 * * *"),
        ("@HOURLY", "0 * * * *"),
    ],
)
def test_macros_mean_their_five_fields(macro: str, fields: str) -> None:
    a, b = cron.parse(macro), cron.parse(fields)
    assert (a.minutes, a.hours, a.days_of_month, a.months, a.days_of_week) == (
        b.minutes,
        b.hours,
        b.days_of_month,
        b.months,
        b.days_of_week,
    )
    assert (a.dom_star, a.dow_star) == (b.dom_star, b.dow_star)


@pytest.mark.parametrize(
    ("expression", "field", "reason"),
    [
        ("60 * * * *", "minute", "60 is out of range 0-59"),
        ("* 24 * * *", "hour", "24 is out of range 0-23"),
        ("* * 0 * *", "day-of-month", "0 is out of range 1-31"),
        ("* * * 13 *", "month", "13 is out of range 1-12"),
        ("* * * * 8", "day-of-week", "8 is out of range 0-7"),
        ("* * * smarch *", "month", "'smarch' is not a number or a month name"),
        ("* * * * funday", "day-of-week", "'funday' is not a number or a day-of-week name"),
        ("x * * * *", "minute", "'x' is not a number"),
        ("-1 * * * *", "minute", "'' is not a number"),
        ("*/0 * * * *", "minute", "step '0' must be a positive number"),
        ("*/x * * * *", "minute", "step 'x' must be a positive number"),
        ("30-10 * * * *", "minute", "range '30-10' runs backwards"),
        ("* * * * fri-mon", "day-of-week", "range 'fri-mon' runs backwards"),
        ("1,,2 * * * *", "minute", "empty list item"),
        ("0 0 30 feb *", "day-of-month", "day 30 never occurs in feb"),
        ("0 0 31 apr,jun *", "day-of-month", "day 31 never occurs in apr,jun"),
        ("* * * *", None, "expected 5 fields"),
        ("* * * * * *", None, "expected 5 fields"),
        ("", None, "expected 5 fields"),
        ("@reboot", None, "unknown macro '@reboot'"),
    ],
)
def test_bad_expressions_name_the_field_and_the_reason(
    expression: str, field: str | None, reason: str
) -> None:
    with pytest.raises(cron.CronError) as caught:
        cron.parse(expression)
    assert caught.value.field == field
    assert reason in str(caught.value)
    if field:
        assert f"{field} field: " in str(caught.value)
    assert isinstance(caught.value, ValueError)


def test_feb_29_is_possible_and_found_years_ahead() -> None:
    s = cron.parse("0 0 29 2 *")
    assert s.next_after(datetime(2025, 1, 1)) == datetime(2028, 2, 29)
    # Day-of-week starred with a step keeps Vixie's AND rule: Feb 29 on a Sunday.
    assert cron.parse("0 0 29 2 */7").next_after(datetime(2024, 3, 1)) == datetime(2032, 2, 29)


# --- the day rule and hand-worked fire times ----------------------------------------------


def test_both_day_fields_restricted_fire_on_either() -> None:
    s = cron.parse("0 12 1,15 * fri")  # the 1st, the 15th and every Friday
    fires = list(s.fire_times(datetime(2024, 3, 1), datetime(2024, 3, 31, 23, 59)))
    assert [f.day for f in fires] == [1, 8, 15, 22, 29]  # 2024-03-01 was a Friday
    s = cron.parse("0 12 2 * fri")
    assert [f.day for f in s.fire_times(datetime(2024, 3, 1), datetime(2024, 3, 10))] == [1, 2, 8]


def test_a_starred_day_field_makes_the_rule_and() -> None:
    # "*/2" starts with "*": odd days that are also Fridays (Vixie's DOM_STAR).
    s = cron.parse("0 12 */2 * fri")
    fires = list(s.fire_times(datetime(2024, 3, 1), datetime(2024, 3, 31, 23, 59)))
    assert [f.day for f in fires] == [1, 15, 29]


def test_next_after_is_strictly_after_and_minute_aligned() -> None:
    s = cron.parse("* * * * *")
    assert s.next_after(datetime(2024, 1, 1, 12, 0)) == datetime(2024, 1, 1, 12, 1)
    assert s.next_after(datetime(2024, 1, 1, 12, 0, 59, 999)) == datetime(2024, 1, 1, 12, 1)
    s = cron.parse("@yearly")
    assert s.next_after(datetime(2024, 12, 31, 23, 59)) == datetime(2025, 1, 1)


def test_fire_times_interval_is_open_closed() -> None:
    s = cron.parse("0 * * * *")
    fires = list(s.fire_times(datetime(2024, 1, 1, 1), datetime(2024, 1, 1, 3)))
    assert fires == [datetime(2024, 1, 1, 2), datetime(2024, 1, 1, 3)]


def test_aware_times_keep_their_zone_and_naive_mixing_is_refused() -> None:
    zone = ZoneInfo("Europe/Berlin")
    fire = cron.parse("0 9 * * *").next_after(datetime(2024, 6, 1, 10, tzinfo=zone))
    assert fire == datetime(2024, 6, 2, 9, tzinfo=zone)
    assert fire.tzinfo is zone
    with pytest.raises(ValueError, match="both be naive or both be aware"):
        list(cron.parse("@daily").fire_times(datetime(2024, 1, 1), datetime.now(UTC)))


NEW_YORK = ZoneInfo("America/New_York")


def test_a_wall_time_in_the_spring_gap_fires_when_the_gap_ends() -> None:
    s = cron.parse("30 2 * * *")
    fires = list(
        s.fire_times(datetime(2024, 3, 9, tzinfo=NEW_YORK), datetime(2024, 3, 12, tzinfo=NEW_YORK))
    )
    assert [f.isoformat() for f in fires] == [
        "2024-03-09T02:30:00-05:00",
        "2024-03-10T03:00:00-04:00",  # 02:30 did not exist that night
        "2024-03-11T02:30:00-04:00",
    ]


def test_a_repeated_wall_time_fires_once() -> None:
    s = cron.parse("30 1 * * *")
    start = datetime(2024, 11, 3, tzinfo=NEW_YORK)
    fires = list(s.fire_times(start, datetime(2024, 11, 3, 12, tzinfo=NEW_YORK)))
    assert [f.isoformat() for f in fires] == ["2024-11-03T01:30:00-04:00"]
    # From inside the second 01:xx hour, the next fire is tomorrow's, not the first pass.
    second_pass = datetime(2024, 11, 3, 6, 10, tzinfo=UTC).astimezone(NEW_YORK)
    assert second_pass.fold == 1
    assert s.next_after(second_pass).isoformat() == "2024-11-04T01:30:00-05:00"


def test_skipping_by_field_is_fast_for_sparse_schedules() -> None:
    # Feb 29 on a Sunday. Minute by minute this is ~16 million steps (minutes of work);
    # skipping whole months and days it is about a thousand.
    s = cron.parse("0 0 29 2 */7")
    begin = time.perf_counter()
    fires = list(s.fire_times(datetime(2000, 1, 1), datetime(2030, 1, 1)))
    assert fires == [datetime(2004, 2, 29)]
    assert time.perf_counter() - begin < 1.0


# --- against brute force ------------------------------------------------------------------


def _brute_naive(s: cron.CronSchedule, after: datetime, until: datetime) -> list[datetime]:
    t = after.replace(second=0, microsecond=0) + MINUTE
    found = []
    while t <= until:
        if _reference_match(s, t):
            found.append(t)
        t += MINUTE
    return found


def _reference_match(s: cron.CronSchedule, t: datetime) -> bool:
    """Written out again, apart from CronSchedule.matches: Sunday is isoweekday 7 -> 0."""
    dom_ok = t.day in s.days_of_month
    dow_ok = t.isoweekday() % 7 in s.days_of_week
    day_ok = (dom_ok and dow_ok) if (s.dom_star or s.dow_star) else (dom_ok or dow_ok)
    return t.minute in s.minutes and t.hour in s.hours and t.month in s.months and day_ok


def _brute_zoned(
    s: cron.CronSchedule, after: datetime, until: datetime, zone: ZoneInfo
) -> list[datetime]:
    """Walk UTC minutes; fire on the first pass of a matching wall minute, and once at the
    end of a spring-forward gap if any skipped wall minute matches."""
    t = after.astimezone(UTC).replace(second=0, microsecond=0) + MINUTE
    end = until.astimezone(UTC)
    previous_wall = (t - MINUTE).astimezone(zone).replace(tzinfo=None)
    found = []
    while t <= end:
        local = t.astimezone(zone)
        wall = local.replace(tzinfo=None, fold=0)
        skipped = _walls_between(previous_wall + MINUTE, wall)
        if (_reference_match(s, wall) and local.fold == 0) or any(
            _reference_match(s, w) for w in skipped
        ):
            found.append(local)
        previous_wall = wall
        t += MINUTE
    return found


def _walls_between(start: datetime, stop: datetime) -> Iterator[datetime]:
    while start < stop:
        yield start
        start += MINUTE


def _field(low: int, high: int, names: list[str] | None = None) -> st.SearchStrategy[str]:
    def value(n: int) -> st.SearchStrategy[str]:
        if names and n - low < len(names):
            return st.sampled_from([str(n), names[n - low], names[n - low].upper()])
        return st.just(str(n))

    number = st.integers(low, high).flatmap(value)
    pair = st.tuples(st.integers(low, high), st.integers(low, high)).map(sorted)
    span = pair.flatmap(lambda p: st.tuples(value(p[0]), value(p[1])).map("-".join))
    step = st.integers(1, high - low + 2).map(str)
    item = st.one_of(
        st.just("*"),
        number,
        span,
        st.tuples(st.just("*"), step).map("/".join),
        st.tuples(span, step).map("/".join),
        st.tuples(number, step).map("/".join),
    )
    return st.lists(item, min_size=1, max_size=3).map(",".join)


MONTHS = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
DAYS = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"]

expressions = st.tuples(
    _field(0, 59),
    _field(0, 23),
    # Half the day and month fields are "*", so that short windows see fires.
    st.one_of(st.just("*"), _field(1, 31)),
    st.one_of(st.just("*"), _field(1, 12, MONTHS)),
    _field(0, 7, DAYS),
).map(" ".join)


starts = st.datetimes(datetime(1999, 1, 1), datetime(2040, 12, 31))


@settings(max_examples=150, deadline=None)
@given(expression=expressions, after=starts, hours=st.integers(1, 72))
def test_fire_times_match_brute_force(expression: str, after: datetime, hours: int) -> None:
    try:
        s = cron.parse(expression)
    except cron.CronError as exc:
        # The one rejection generated syntax can meet: "0 0 31 feb *".
        assert "never occurs" in str(exc), exc
        return
    until = after + timedelta(hours=hours)
    assert list(s.fire_times(after, until)) == _brute_naive(s, after, until)


@settings(max_examples=150, deadline=None)
@given(expression=expressions, after=starts)
def test_next_after_matches_a_day_by_day_search(expression: str, after: datetime) -> None:
    """For sparse schedules too: walk days (any matching day's first matching minute)."""
    try:
        s = cron.parse(expression)
    except cron.CronError as exc:
        assert "never occurs" in str(exc), exc
        return
    expected = None
    day = after.replace(hour=0, minute=0, second=0, microsecond=0)
    while expected is None:
        if _reference_match(s, day.replace(hour=s.hours[0], minute=s.minutes[0])):
            for hour in s.hours:
                for minute in s.minutes:
                    t = day.replace(hour=hour, minute=minute)
                    if t > after and expected is None:
                        expected = t
        day += timedelta(days=1)
    assert s.next_after(after) == expected


# Windows around real transitions: New York and London (1 h), Lord Howe (30 min).
TRANSITIONS = [
    ("America/New_York", datetime(2024, 3, 10, 7, tzinfo=UTC)),
    ("America/New_York", datetime(2024, 11, 3, 6, tzinfo=UTC)),
    ("Europe/London", datetime(2024, 3, 31, 1, tzinfo=UTC)),
    ("Europe/London", datetime(2024, 10, 27, 1, tzinfo=UTC)),
    ("Australia/Lord_Howe", datetime(2024, 4, 6, 15, tzinfo=UTC)),
    ("Australia/Lord_Howe", datetime(2024, 10, 5, 15, 30, tzinfo=UTC)),
    ("UTC", datetime(2024, 1, 1, tzinfo=UTC)),
]

zoned_expressions = st.tuples(_field(0, 59), _field(0, 23)).map(lambda f: f"{f[0]} {f[1]} * * *")


@settings(max_examples=150, deadline=None)
@given(
    expression=zoned_expressions,
    transition=st.sampled_from(TRANSITIONS),
    offset_min=st.integers(-300, 120),
    hours=st.integers(1, 8),
)
def test_zoned_fire_times_match_brute_force_across_dst(
    expression: str, transition: tuple[str, datetime], offset_min: int, hours: int
) -> None:
    zone = ZoneInfo(transition[0])
    after = (transition[1] + timedelta(minutes=offset_min, seconds=17)).astimezone(zone)
    until = after + timedelta(hours=hours)  # same-zone arithmetic: a wall-clock span
    s = cron.parse(expression)
    got = list(s.fire_times(after, until))
    expected = _brute_zoned(s, after, until, zone)
    assert [g.astimezone(UTC) for g in got] == [e.astimezone(UTC) for e in expected]
    assert all(g.tzinfo is zone for g in got)

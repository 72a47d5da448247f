"""Cron expressions (sans-I/O): parse the five crontab(5) fields and find fire times.

Syntax is Vixie cron's, the one in every Linux crontab::

    ┌──────── minute        0-59
    │ ┌────── hour          0-23
    │ │ ┌──── day of month  1-31
    │ │ │ ┌── month         1-12 or jan-dec
    │ │ │ │ ┌ day of week   0-7 or sun-sat (0 and 7 are both Sunday)
    * * * * *

Each field is a comma list of ``*``, ``N``, ``N-M``, each optionally ``/STEP``; names are
case-insensitive. ``N/STEP`` means ``N-max/STEP`` (croniter and Quartz accept it; Vixie
cron rejects it, so accepting it breaks no valid crontab). Macros: ``@yearly``
(``@annually``), ``@monthly``, ``@weekly``, ``@daily`` (``@midnight``), ``@hourly``.

The day rule is Vixie's: if either day field starts with ``*`` (``*/2`` included) a day must
match both fields; if neither does, a day matching either one fires ("1,15 * * fri" runs on
the 1st, the 15th and every Friday).

Times are minutes of wall-clock time in the datetime's own zone. For an aware datetime in a
zone with daylight saving time, a wall time repeated in the autumn fires once, at its first
occurrence, and a wall time skipped by the spring-forward gap fires when the gap ends (so a
daily 02:30 job still runs on that day, at 03:00, as under Vixie cron; unlike Vixie cron,
an every-15-minutes job also pauses for the repeated hour instead of running twice).
"""

from __future__ import annotations

import bisect
import calendar
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo

MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}

_MONTHS = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
_DAYS = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"]


@dataclass(frozen=True)
class _Field:
    name: str
    low: int
    high: int
    names: dict[str, int]


_FIELDS = (
    _Field("minute", 0, 59, {}),
    _Field("hour", 0, 23, {}),
    _Field("day-of-month", 1, 31, {}),
    _Field("month", 1, 12, {name: n for n, name in enumerate(_MONTHS, start=1)}),
    # 7 is accepted as Sunday and folded to 0 after parsing.
    _Field("day-of-week", 0, 7, {name: n for n, name in enumerate(_DAYS)}),
)

# A match always exists within one 400-year Gregorian cycle (every date falls on every
# weekday within it), so a search that runs past this has found an impossible schedule.
_SEARCH_YEARS = 401

_MINUTE = timedelta(minutes=1)


class CronError(ValueError):
    """A malformed expression; the message names the field and the reason."""

    def __init__(self, expression: str, field: str | None, reason: str) -> None:
        where = f"{field} field: " if field else ""
        super().__init__(f"cron {expression!r}: {where}{reason}")
        self.expression = expression
        self.field = field
        self.reason = reason


@dataclass(frozen=True)
class CronSchedule:
    """A parsed expression: the allowed values of each field, sorted."""

    expression: str
    minutes: tuple[int, ...]
    hours: tuple[int, ...]
    days_of_month: tuple[int, ...]
    months: tuple[int, ...]
    days_of_week: tuple[int, ...]  # 0 = Sunday .. 6 = Saturday
    dom_star: bool  # the field started with "*": Vixie's DOM_STAR flag
    dow_star: bool

    def matches(self, dt: datetime) -> bool:
        """Whether the wall-clock minute of ``dt`` is a fire time (seconds are ignored)."""
        return (
            dt.minute in self.minutes
            and dt.hour in self.hours
            and dt.month in self.months
            and self._day_matches(dt.year, dt.month, dt.day)
        )

    def next_after(self, dt: datetime) -> datetime:
        """The first fire time strictly after ``dt``, in ``dt``'s zone (naive if it is)."""
        wall = dt.replace(tzinfo=None, second=0, microsecond=0, fold=0) + _MINUTE
        if dt.tzinfo is None:
            return self._next_wall(wall)
        zone = dt.tzinfo
        floor = dt.astimezone(UTC)
        while True:
            wall = self._next_wall(wall)
            fire = _instant(wall, zone)
            # Compare in UTC: same-zone aware datetimes compare by wall time alone. A fire
            # time can be at or before ``dt`` when ``dt`` is in the second pass of a
            # repeated hour (its wall times fire on the first pass) or at the end of a gap.
            if fire.astimezone(UTC) > floor:
                return fire
            wall += _MINUTE

    def fire_times(self, after: datetime, until: datetime) -> Iterator[datetime]:
        """Fire times in ``(after, until]``, ascending, in ``after``'s zone."""
        if (after.tzinfo is None) != (until.tzinfo is None):
            raise ValueError("after and until must both be naive or both be aware")
        end = until if until.tzinfo is None else until.astimezone(UTC)
        fire = self.next_after(after)
        while (fire if fire.tzinfo is None else fire.astimezone(UTC)) <= end:
            yield fire
            fire = self.next_after(fire)

    def _day_matches(self, year: int, month: int, day: int) -> bool:
        dom = day in self.days_of_month
        # calendar.weekday is Monday=0; cron's Sunday=0.
        dow = (calendar.weekday(year, month, day) + 1) % 7 in self.days_of_week
        if self.dom_star or self.dow_star:
            return dom and dow
        return dom or dow

    def _next_wall(self, t: datetime) -> datetime:
        """The first matching wall time at or after ``t`` (a naive whole minute), skipping
        whole months, days and hours that cannot match instead of walking minutes."""
        last_year = t.year + _SEARCH_YEARS
        while t.year <= last_year:
            if t.month not in self.months:
                t = self._next_month_start(t)
                continue
            if not self._day_matches(t.year, t.month, t.day):
                t = t.replace(hour=0, minute=0) + timedelta(days=1)
                continue
            if t.hour not in self.hours:
                i = bisect.bisect_right(self.hours, t.hour)
                if i < len(self.hours):
                    t = t.replace(hour=self.hours[i], minute=0)
                else:
                    t = t.replace(hour=0, minute=0) + timedelta(days=1)
                continue
            if t.minute not in self.minutes:
                i = bisect.bisect_right(self.minutes, t.minute)
                if i < len(self.minutes):
                    t = t.replace(minute=self.minutes[i])
                else:
                    t = t.replace(minute=0) + timedelta(hours=1)
                continue
            return t
        raise CronError(self.expression, None, "never fires")

    def _next_month_start(self, t: datetime) -> datetime:
        """Midnight on the 1st of the next allowed month after ``t``'s."""
        start = t.replace(day=1, hour=0, minute=0)
        i = bisect.bisect_right(self.months, t.month)
        if i < len(self.months):
            return start.replace(month=self.months[i])
        return start.replace(year=t.year + 1, month=self.months[0])


def _instant(wall: datetime, zone: tzinfo) -> datetime:
    """When the naive ``wall`` time happens in ``zone``: its first occurrence if the autumn
    repeats it, the end of the gap if spring forward skipped it (the clock jumped past it,
    so it is due then, as Vixie cron runs skipped jobs right after the change)."""
    moment = wall.replace(tzinfo=zone)  # fold=0: the first occurrence
    while moment.astimezone(UTC).astimezone(zone).replace(tzinfo=None) != wall:
        # A gap: the wall time does not exist. Walk to the first minute that does
        # (gaps are whole minutes and at most a few hours long).
        wall += _MINUTE
        moment = wall.replace(tzinfo=zone)
    return moment


def parse(expression: str) -> CronSchedule:
    """Parse a five-field expression or a macro.

    Raises:
        CronError: (a ValueError) naming the field and the reason.
    """
    text = expression.strip()
    if text.startswith("@"):
        macro = MACROS.get(text.lower())
        if macro is None:
            known = ", ".join(MACROS)
            raise CronError(expression, None, f"unknown macro {text!r} (known: {known})")
        text = macro
    parts = text.split()
    if len(parts) != 5:
        raise CronError(
            expression,
            None,
            f"expected 5 fields (minute hour day-of-month month day-of-week) or a macro, "
            f"got {len(parts)}",
        )
    values = [
        _parse_field(expression, part, field) for part, field in zip(parts, _FIELDS, strict=True)
    ]
    days_of_week = sorted({day % 7 for day in values[4]})
    schedule = CronSchedule(
        expression=expression,
        minutes=tuple(values[0]),
        hours=tuple(values[1]),
        days_of_month=tuple(values[2]),
        months=tuple(values[3]),
        days_of_week=tuple(days_of_week),
        dom_star=parts[2].startswith("*"),
        dow_star=parts[4].startswith("*"),
    )
    _check_possible(schedule)
    return schedule


def _parse_field(expression: str, text: str, field: _Field) -> list[int]:
    def fail(reason: str) -> CronError:
        return CronError(expression, field.name, reason)

    def number(token: str) -> int:
        value = field.names.get(token.lower())
        if value is None:
            if not token.isdigit():
                if field.names:
                    raise fail(f"{token!r} is not a number or a {field.name} name")
                raise fail(f"{token!r} is not a number")
            value = int(token)
        if not field.low <= value <= field.high:
            raise fail(f"{value} is out of range {field.low}-{field.high}")
        return value

    chosen: set[int] = set()
    for item in text.split(","):
        if not item:
            raise fail(f"empty list item in {text!r}")
        span, slash, step_text = item.partition("/")
        step = 1
        if slash:
            if not step_text.isdigit() or int(step_text) == 0:
                raise fail(f"step {step_text!r} must be a positive number")
            step = int(step_text)
        if span == "*":
            # Vixie's "*" for day-of-week is 0-7; folding 7 to Sunday makes that 0-6.
            low, high = field.low, field.high
        elif "-" in span:
            first, _, last = span.partition("-")
            low, high = number(first), number(last)
            if low > high:
                raise fail(f"range {span!r} runs backwards")
        else:
            low = number(span)
            high = field.high if slash else low
        chosen.update(range(low, high + 1, step))
    return sorted(chosen)


def _check_possible(schedule: CronSchedule) -> None:
    """Reject day-of-month/month pairs that never exist ("0 0 30 feb *"): with a starred
    day-of-week field the day must exist, and no search would ever find one."""
    if not schedule.dom_star and not schedule.dow_star:
        return  # the day-of-week alone fires
    # 2000 is a leap year: February has its 29th.
    if any(
        day <= calendar.monthrange(2000, month)[1]
        for month in schedule.months
        for day in schedule.days_of_month
    ):
        return
    days = ",".join(str(day) for day in schedule.days_of_month)
    months = ",".join(_MONTHS[month - 1] for month in schedule.months)
    raise CronError(schedule.expression, "day-of-month", f"day {days} never occurs in {months}")

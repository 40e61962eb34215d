"""A skill's effectiveness on its change page: the figures, and the outcomes per week as an inline SVG."""

from django.utils.html import format_html, format_html_join

from apps.skills.effectiveness import outcomes_over_time, skill_effectiveness
from apps.skills.models import Skill

CHART_WIDTH, CHART_HEIGHT, BAR_GAP = 360, 80, 4


def _interval(pair) -> str:
    return "–" if pair is None else f"[{pair[0]:+.2f}, {pair[1]:+.2f}]"


def effectiveness_panel(skill: Skill):
    """An inline SVG: no script, nothing loaded from elsewhere."""
    figures = skill_effectiveness(skill)
    weeks = outcomes_over_time(skill)
    tallest = max((successes + failures for _, successes, failures in weeks), default=0)
    bars = []
    if tallest:
        width = CHART_WIDTH / max(len(weeks), 1)
        for index, (week, successes, failures) in enumerate(weeks):
            x = index * width + BAR_GAP / 2
            success_height = CHART_HEIGHT * successes / tallest
            failure_height = CHART_HEIGHT * failures / tallest
            bars.append(
                (
                    f"{x:.1f}",
                    f"{CHART_HEIGHT - success_height:.1f}",
                    f"{width - BAR_GAP:.1f}",
                    f"{success_height:.1f}",
                    f"{CHART_HEIGHT - success_height - failure_height:.1f}",
                    f"{failure_height:.1f}",
                    f"week of {week:%Y-%m-%d}: {successes} succeeded, {failures} failed",
                )
            )
    rate = figures["success_rate"]
    summary = format_html(
        "<p>{} uses ({} applied); {} task sessions with an outcome count, of {} users (each counted once): {} "
        "succeeded, {} failed; success rate {} {}; the scope's other users {}; lift {} {}. Since version {} (a "
        "person's approval starts it), review weighs {} users. Feedback: {} helped, {} hurt, {} irrelevant.</p>",
        figures["uses"],
        figures["applied"],
        figures["sessions"],
        figures["users"],
        figures["successes"],
        figures["failures"],
        "–" if rate is None else f"{rate:.0%}",
        _interval(figures["success_rate_interval"]),
        "–" if figures["baseline_rate"] is None else f"{figures['baseline_rate']:.0%}",
        "–" if figures["lift"] is None else f"{figures['lift']:+.2f}",
        _interval(figures["lift_interval"]),
        figures["review"]["since_version"],
        figures["review"]["users"],
        figures["feedback"]["helped"],
        figures["feedback"]["hurt"],
        figures["feedback"]["irrelevant"],
    )
    if not bars:
        return summary
    chart = format_html(
        '<svg class="skill-outcomes" role="img" aria-label="outcomes per week" width="{}" height="{}">{}</svg>',
        CHART_WIDTH,
        CHART_HEIGHT,
        format_html_join(
            "",
            '<g><title>{6}</title><rect x="{0}" y="{1}" width="{2}" height="{3}" fill="#2e7d32"></rect>'
            '<rect x="{0}" y="{4}" width="{2}" height="{5}" fill="#c62828"></rect></g>',
            bars,
        ),
    )
    return format_html("{}{}", summary, chart)

"""Reading results: paired statistics, comparisons, pre-registered gates and reports."""

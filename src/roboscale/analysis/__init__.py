"""Statistics, the sustained verdict, plots and the report of a results folder."""

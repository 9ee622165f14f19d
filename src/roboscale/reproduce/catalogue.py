"""Every seed finding, declared once: its words, the experiment that measures it with the
seed's parameters, its figures and the rules that judge them. docs/reproduction.md is
written from this and the kept results, never by hand."""

from __future__ import annotations

from roboscale.reproduce import labreport, paper, thesis
from roboscale.reproduce.experiments import EXPERIMENT_BY_ID, EXPERIMENTS
from roboscale.reproduce.model import Finding

FINDINGS: list[Finding] = [*thesis.findings(), *labreport.findings(), *paper.findings()]

__all__ = ["EXPERIMENTS", "EXPERIMENT_BY_ID", "FINDINGS"]

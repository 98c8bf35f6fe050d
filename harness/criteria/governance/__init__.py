"""Governance criteria (ACCEPTANCE.md, Governance 0-6): quota, borrowing and reclaim, tenant isolation, audit."""

"""(being filled in: see the Table 1 issue)"""

__all__: list[str] = []
